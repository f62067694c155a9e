"""The hot path a test's graymq processes run, compiled (``graymq.protocol._speedups``) or pure Python
(``GRAYMQ_PURE=1``, what runs where no compiler exists), and a check of which one a running process loaded.

A test parametrized over ``HOT_PATHS`` passes ``path_env(path)`` to the processes it starts and checks them with
``assert_runs``: the broker's guarantees are then shown on both paths, each one proven to be the one that ran.
"""

from __future__ import annotations

import re
from pathlib import Path

from graymq.devkit.processes import GraymqProcess

HOT_PATHS = ("compiled", "pure")
# the extension's shared object (not _client_speedups: the blocking client's encoder, a module of its own)
_EXTENSION = re.compile(r"/_speedups\.[^/\s]*\.so$", re.MULTILINE)


def path_env(path: str) -> dict[str, str]:
    """The environment selecting ``path`` in a graymq process: explicit either way, so a ``GRAYMQ_PURE`` the test
    run inherited does not decide the compiled variant."""
    if path not in HOT_PATHS:
        raise ValueError(f"hot path {path!r}: expected one of {HOT_PATHS}")
    return {"GRAYMQ_PURE": "1" if path == "pure" else "0"}


def loaded_path(pid: int) -> str:
    """``compiled`` when the extension's shared object is mapped into process ``pid`` (``graymq.protocol.native``
    imports it as the process starts, unless ``GRAYMQ_PURE`` is set or it is missing), else ``pure``."""
    return "compiled" if _EXTENSION.search(Path(f"/proc/{pid}/maps").read_text()) else "pure"


def assert_runs(proc: GraymqProcess, path: str) -> str:
    """Fail unless the ready process ``proc`` runs the hot path ``path``; returns a note saying it does."""
    found = loaded_path(proc.proc.pid)
    assert found == path, f"graymq {' '.join(proc.args)} runs the {found} hot path, not the {path} one"
    return f"{proc.args[0]} on the {path} hot path (checked in its process)"
