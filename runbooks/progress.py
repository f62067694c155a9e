"""Progress on stderr: a redrawn bar on a terminal, a line per change otherwise (logs, CI)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """``update`` draws the bar (a repeated line is not drawn again); ``note`` prints a line under it.

    A note equal to the previous one, with no bar drawn in between, is not printed again (a step that
    re-checks what it already reported says it once); an empty note only ends the bar's line.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._last = ""
        self._last_note = ""
        self._tty = self.stream.isatty()

    def update(self, done: int, total: int, text: str) -> None:
        """Draw ``done`` of ``total``; with no total (``total <= 0``: nothing measurable yet) only ``text``."""
        if total <= 0:
            line = text
        else:
            fraction = min(1.0, max(0.0, done / total))
            filled = int(fraction * self.width)
            line = f"[{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:5.1f}% {text}"
        if line == self._last:
            return
        self._last = line
        self._last_note = ""
        if self._tty:
            self.stream.write("\r" + line.ljust(100))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self._tty and self._last:
            self.stream.write("\n")
            self._last = ""
        if text and text != self._last_note:
            self.stream.write(text + "\n")
            self._last_note = text
        self.stream.flush()
