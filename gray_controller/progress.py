"""Progress on stderr: a redrawn bar on a terminal, a line per change otherwise (logs, CI)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._last = ""
        self._tty = self.stream.isatty()

    def update(self, done: int, total: int, text: str) -> None:
        fraction = 1.0 if total <= 0 else min(1.0, max(0.0, done / total))
        filled = int(fraction * self.width)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {fraction * 100:5.1f}% {text}"
        if line == self._last:
            return
        self._last = line
        if self._tty:
            self.stream.write("\r" + line.ljust(100))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self._tty and self._last:
            self.stream.write("\n")
            self._last = ""
        self.stream.write(text + "\n")
        self.stream.flush()
