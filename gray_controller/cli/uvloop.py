"""``python -m graymq.gray_controller.cli.uvloop ARGS``: the ``graymq`` command on uvloop (the bench's uvloop rows run
the same broker code on it)."""

from graymq.protocol import loop

if not loop.install():
    raise SystemExit("uvloop is not installed (pip install 'graymq[fast]')")

from graymq.gray_controller.cli import main  # noqa: E402 - after the loop policy, before any loop starts

main()
