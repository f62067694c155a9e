"""A child process's output lines as they come: one thread reads the pipe into a queue, so a caller can wait for
the next line with a deadline (or take what came without waiting); an empty string marks the pipe's end."""

from __future__ import annotations

import queue
import threading
from typing import IO


class PipeLines:
    """The lines of ``pipe``, read in a daemon thread from now on."""

    def __init__(self, pipe: IO[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            self._lines.put(line)
        self._lines.put("")

    def next(self, timeout_s: float) -> str:
        """The next line ("" at the pipe's end); ``queue.Empty`` when none came within ``timeout_s``."""
        return self._lines.get(timeout=timeout_s)

    def ready(self) -> list[str]:
        """Every line read and not taken yet, without waiting (the end marker left out)."""
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return lines
            if line:
                lines.append(line)
