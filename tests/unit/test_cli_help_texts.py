"""What `graymq ... --help` shows a newcomer: a description for every command group, readable metavars, the gray
actions named in the order they are listed."""

from __future__ import annotations

import argparse
import re

import pytest

from graymq.gray_controller.cli import build_parser


def subcommand(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("path", [("gray",), ("topic",), ("group",), ("gray", "status"), ("audit",)])
def test_every_command_group_has_a_description(path: tuple[str, ...]) -> None:
    assert subcommand(build_parser(), *path).description, f"graymq {' '.join(path)} --help has no description"


@pytest.mark.parametrize("path", [("consume",), ("produce",), ("gray", "promote"), ("gray", "rollback"),
                                  ("gray", "rollout"), ("gray", "status"), ("topic", "route")])
def test_metavars_are_readable(path: tuple[str, ...]) -> None:
    usage = subcommand(build_parser(), *path).format_help()
    for unreadable in ("FROM_", "TIMEOUT", "IDLE_EXIT", "WAIT_TIMEOUT", "INTERVAL", "HEARTBEAT_INTERVAL"):
        # a whole word: GRAYMQ_HEARTBEAT_INTERVAL_S, a variable named in the help, is no metavar
        assert not re.search(rf"(?<!\w){unreadable}(?!\w)", usage), usage


def test_the_gray_actions_are_named_in_the_order_they_are_listed() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    gray = subcommand(parser, "gray")
    [actions] = [a for a in gray._actions if isinstance(a, argparse._SubParsersAction)]
    named = [c.help for c in commands._choices_actions if c.dest == "gray"][0]
    assert named == "gray release: " + ", ".join(actions.choices), named

