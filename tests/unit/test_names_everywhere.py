"""The broker's settings and the CLI's labels check names with the one rule of protocol/names.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from graymq.broker_ext.config import BrokerSettings
from graymq.gray_controller.cli.common import parse_labels
from graymq.protocol.errors import ConfigError
from graymq.protocol.names import LABEL_KEY_RULE, LABEL_VALUE_RULE, NAME_RULE


@pytest.mark.parametrize("name", ["", "broker a", "b\x00", "b.1", "b" * 128])
def test_a_broker_refuses_a_name_breaking_the_rule(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid broker name") as refused:
        BrokerSettings(name=name)
    assert NAME_RULE in str(refused.value)
    assert BrokerSettings(name="broker-a_1").name == "broker-a_1"


def test_cli_labels_follow_the_label_rule() -> None:
    assert parse_labels(["app.kubernetes.io/version=2.1 beta", "zone=a"]) == {
        "app.kubernetes.io/version": "2.1 beta", "zone": "a"}
    with pytest.raises(ConfigError, match=LABEL_KEY_RULE.replace(".", r"\.")):
        parse_labels(["k k=v"])
    with pytest.raises(ConfigError) as refused:
        parse_labels(["k=" + "v" * 256])
    assert LABEL_VALUE_RULE in refused.value.message
