"""The bound of the CLI's wait for a cluster coming up: 60 s unless GRAYMQ_NAMESERVER_WAIT_S says otherwise, a bad
value refused in one line naming the variable."""

from __future__ import annotations

import pytest

from graymq.gray_controller.cli.cluster_wait import DEFAULT_WAIT_S, wait_bound
from graymq.protocol.errors import ConfigError


def test_the_default_bound_is_60_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAYMQ_NAMESERVER_WAIT_S", raising=False)
    assert wait_bound() == DEFAULT_WAIT_S == 60.0


@pytest.mark.parametrize(("text", "bound"), [("0", 0.0), ("2.5", 2.5), (" 600 ", 600.0)])
def test_the_variable_sets_the_bound(monkeypatch: pytest.MonkeyPatch, text: str, bound: float) -> None:
    monkeypatch.setenv("GRAYMQ_NAMESERVER_WAIT_S", text)
    assert wait_bound() == bound


@pytest.mark.parametrize("text", ["-1", "601", "soon", "nan", "inf"])
def test_a_bad_bound_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("GRAYMQ_NAMESERVER_WAIT_S", text)
    with pytest.raises(ConfigError, match="GRAYMQ_NAMESERVER_WAIT_S must be a number of seconds from 0 to 600"):
        wait_bound()
