"""A push consumer's settings: frozen ConsumeOptions and ConsumerSettings, and every keyword argument users pass
still works."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

from graymq.client import PushConsumer
from graymq.client.consumer import settings as settings_module
from graymq.client.consumer.settings import ConsumeOptions, ConsumerSettings
from graymq.client.message import ConsumeStatus
from graymq.protocol.errors import BadRequestError

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


def test_how_it_consumes_is_one_options_value_and_each_field_is_still_a_keyword_argument() -> None:
    consumer = PushConsumer("G", NS, listener=listener, broadcasting=True, orderly=True, consume_from="timestamp",
                            consume_timestamp_ms=5, offset_dir=Path("/tmp/offsets"), long_poll_s=1.0)
    assert consumer.options == ConsumeOptions(True, "timestamp", 5, True, Path("/tmp/offsets"))
    assert (consumer.broadcasting, consumer.orderly, consumer.consume_from, consumer.consume_timestamp_ms) == (
        True, True, "timestamp", 5)
    assert consumer.settings == ConsumerSettings(long_poll_s=1.0)
    given = PushConsumer("G", NS, listener=listener, options=ConsumeOptions(orderly=True), consume_from="first")
    assert given.options == ConsumeOptions(orderly=True, consume_from="first")


def test_a_bad_consume_from_is_refused_by_name() -> None:
    with pytest.raises(BadRequestError, match="consume_from must be one of"):
        PushConsumer("G", NS, listener=listener, consume_from="middle")


def test_no_class_of_the_consumer_package_but_a_frozen_settings_value_takes_more_than_12_parameters() -> None:
    import graymq.client.consumer as package

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            frozen_value = dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
            if cls.__module__ == module.__name__ and "__init__" in vars(cls) and not frozen_value:
                parameters = list(inspect.signature(cls.__init__).parameters)[1:]
                assert len(parameters) <= 12, f"{cls.__name__}.__init__ takes {len(parameters)}: {parameters}"
