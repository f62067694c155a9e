"""Which chaos cases run (the chaos table at the end of the run: tests/conftest.py).

Plain ``pytest`` (``make test``) runs the cases listed in ``SUBSET`` only; a run that selects the ``chaos`` marker
(``make chaos``: ``pytest tests/chaos -m chaos``) or sets ``CHAOS_FULL=1`` runs the whole matrix.
"""

from __future__ import annotations

import os

import pytest

SUBSET = {"kill9/sync+promote", "stop_broker/async", "flip/sync", "pop_kill9/sync", "kill9/sync+pure",
          "leader_cut/sync_replicas", "gray_consumer_cut_ns/sync_replicas", "gray_consumer_cut_broker/sync_replicas"}


def _full(config: pytest.Config) -> bool:
    return "chaos" in (config.getoption("markexpr") or "") or os.environ.get("CHAOS_FULL") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _full(config):
        return
    extra = [item for item in items if item.get_closest_marker("chaos") is not None
             and getattr(getattr(item, "callspec", None), "id", None) not in SUBSET]
    if extra:
        config.hook.pytest_deselected(items=extra)
        items[:] = [item for item in items if item not in extra]
