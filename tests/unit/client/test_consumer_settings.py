"""A push consumer's tuning: one frozen ConsumerSettings, and every keyword argument users pass still works."""

from __future__ import annotations

import dataclasses
import doctest

import pytest

from graymq.client import PushConsumer
from graymq.client.consumer import settings as settings_module
from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.message import ConsumeStatus

pytestmark = pytest.mark.unit
NS = "http://127.0.0.1:1"


def listener(messages: list[object]) -> ConsumeStatus:
    return ConsumeStatus.CONSUME_SUCCESS


def test_docstring_example() -> None:
    assert doctest.testmod(settings_module).failed == 0


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ConsumerSettings().pull_batch_size = 1  # type: ignore[misc]


def test_the_readme_keyword_arguments_still_tune_the_consumer() -> None:
    consumer = PushConsumer("G", NS, listener=listener, consume_from="first", pull_batch_size=64, consume_batch_size=8)
    assert consumer.settings == ConsumerSettings(pull_batch_size=64, consume_batch_size=8)
    assert consumer.consume_from == "first"


def test_every_settings_field_is_a_keyword_argument_and_overrides_settings() -> None:
    values = {f.name: 7 for f in dataclasses.fields(ConsumerSettings)}
    assert PushConsumer("G", NS, listener=listener, **values).settings == ConsumerSettings(**values)
    base = ConsumerSettings(drain_timeout_s=5.0, long_poll_s=1.0)
    consumer = PushConsumer("G", NS, listener=listener, settings=base, long_poll_s=2.0)
    assert consumer.settings == ConsumerSettings(drain_timeout_s=5.0, long_poll_s=2.0)
    assert consumer.flip.drain_timeout_s == 5.0


def test_an_unknown_tuning_keyword_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="pull_batch"):
        PushConsumer("G", NS, listener=listener, pull_batch=64)
