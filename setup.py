"""Builds the compiled hot path, ``graymq.protocol._speedups`` (protocol/_speedups.pyx) and the blocking
producer's request encoder ``graymq.protocol._client_speedups`` (protocol/_client_speedups.pyx), with Cython and the
machine's C compiler; everything else is declared in pyproject.toml.

The extension is optional: when Cython or the compiler is missing, or the build fails, a loud message says
so and the install goes on with the pure-Python fallback (``graymq.protocol.native`` warns once at import).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODULES = ("_speedups", "_client_speedups")  # protocol/<name>.pyx: the broker's and the blocking client's
BANNER = "=" * 100


def _loud(reason: str) -> None:
    print(f"\n{BANNER}\ngraymq: the compiled hot path (graymq.protocol._speedups) was NOT built: {reason}\n"
          f"graymq installs and runs on its pure-Python fallback (slower). Install a C compiler (gcc) and\n"
          f"reinstall to build it.\n{BANNER}\n", file=sys.stderr, flush=True)


class OptionalBuildExt(build_ext):
    """build_ext that reports a failure loudly and carries on instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means the pure fallback
            _loud(f"{type(exc).__name__}: {exc}")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _loud(f"{type(exc).__name__}: {exc}")


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _loud(f"Cython is not installed ({exc})")
        return []
    extensions = [Extension(f"graymq.protocol.{name}", [f"protocol/{name}.pyx"], extra_compile_args=["-O2"])
                  for name in MODULES]
    return cythonize(extensions, compiler_directives={"language_level": "3"}, quiet=True)  # type: ignore[no-any-return]


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
