"""Schemathesis hooks of the name server fuzz run (loaded through ``SCHEMATHESIS_HOOKS``)."""

from __future__ import annotations

from typing import Any

import schemathesis

MAX_WAIT_S = 1.0  # a PUT /v1/topics waits up to wait_s for brokers the fuzzer made up: keep the run bounded


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Cap a numeric ``wait_s``: a long wait finds no more bugs, it only makes the run slow."""
    wait = (case.query or {}).get("wait_s")
    try:
        too_long = not isinstance(wait, bool) and float(wait) > MAX_WAIT_S  # generated as a number or a string
    except (TypeError, ValueError):
        return
    if too_long:
        case.query["wait_s"] = MAX_WAIT_S
