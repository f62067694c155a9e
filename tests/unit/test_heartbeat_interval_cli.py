"""`graymq consume|produce --heartbeat-interval S`: seconds above 0 and at most 600, else
GRAYMQ_HEARTBEAT_INTERVAL_S, else the client's own default; the flag wins, a bad value is one line and exit 2."""

from __future__ import annotations

import argparse

import pytest

from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.producer_settings import ProducerSettings
from graymq.gray_controller.cli import build_parser, main
from graymq.gray_controller.cli.common import check_number_args
from graymq.gray_controller.cli.consume_cmd import CONSUMER_HEARTBEAT_S
from graymq.gray_controller.cli.heartbeat_arg import HEARTBEAT_ENV, heartbeat_interval
from graymq.gray_controller.cli.produce_cmd import PRODUCER_HEARTBEAT_S
from graymq.protocol.errors import ConfigError

COMMANDS = {"consume": ["consume", "T", "--group", "G"], "produce": ["produce", "T", "--body", "x"]}


@pytest.fixture(autouse=True)
def no_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HEARTBEAT_ENV, raising=False)


def parsed(command: str, *extra: str) -> argparse.Namespace:
    args = build_parser().parse_args([*COMMANDS[command], *extra])
    check_number_args(args)
    return args


def test_the_defaults_are_the_clients_own() -> None:
    assert CONSUMER_HEARTBEAT_S == ConsumerSettings().nameserver_interval_s == 5.0
    assert PRODUCER_HEARTBEAT_S == ProducerSettings().heartbeat_interval_s == 2.0
    assert heartbeat_interval(parsed("consume"), CONSUMER_HEARTBEAT_S) == 5.0
    assert heartbeat_interval(parsed("produce"), PRODUCER_HEARTBEAT_S) == 2.0


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("1", 1.0), ("600", 600.0), ("0.001", 0.001)])
def test_the_flag_sets_the_interval(command: str, text: str, value: float) -> None:
    assert heartbeat_interval(parsed(command, "--heartbeat-interval", text), 9.0) == value


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("text", ["0", "-1", "600.5", "nan", "inf"])
def test_a_flag_out_of_bounds_exits_2_naming_it(command: str, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*COMMANDS[command], f"--heartbeat-interval={text}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"graymq {command}: --heartbeat-interval must be > 0 and <= 600 s" in err, err


def test_a_flag_that_is_no_number_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*COMMANDS["consume"], "--heartbeat-interval", "soon"])
    assert exited.value.code == 2 and "--heartbeat-interval" in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_the_variable_sets_the_interval(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEARTBEAT_ENV, " 0.75 ")
    assert heartbeat_interval(parsed(command), 5.0) == 0.75


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("variable", ["0.75", "soon"])
def test_the_flag_wins_over_the_variable(command: str, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEARTBEAT_ENV, variable)
    assert heartbeat_interval(parsed(command, "--heartbeat-interval", "1.5"), 5.0) == 1.5


@pytest.mark.parametrize("text", ["0", "-2", "601", "soon", "nan", "inf"])
def test_a_bad_variable_is_a_config_error_naming_it_and_the_fix(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEARTBEAT_ENV, text)
    with pytest.raises(ConfigError, match=rf"{HEARTBEAT_ENV} must be a number of seconds > 0 and <= 600, got "
                                          r"'.*': set it to one \(e\.g\. 1\) or unset it for the default \(5\)"):
        heartbeat_interval(parsed("consume"), 5.0)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_variable_exits_2_before_any_connection(command: str, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(HEARTBEAT_ENV, "soon")
    monkeypatch.setenv("GRAYMQ_NAMESERVER", "http://127.0.0.1:9")  # nothing listens: a connection would fail, exit 1
    assert main(COMMANDS[command]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"graymq {command}: {HEARTBEAT_ENV} must be"), err


@pytest.mark.parametrize("command", COMMANDS)
def test_the_help_names_the_option_and_the_variable(command: str) -> None:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    text = sub.choices[command].format_help()
    assert "--heartbeat-interval S" in text and f"\n  {HEARTBEAT_ENV}  seconds between heartbeats" in text, text
