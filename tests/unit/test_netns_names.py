"""The partition harness's names (tests/support/netns.py) carry the pid of the test process that made them, within
Linux's 15 characters, so a later run can tell a dead process's leftovers from a live one's."""

from __future__ import annotations

import doctest
import os
import subprocess

import pytest

from tests.support import netns
from tests.support.netns import base36, owner_pid

pytestmark = pytest.mark.unit


def test_the_docstring_examples() -> None:
    assert doctest.testmod(netns).failed == 0


@pytest.mark.parametrize("pid", [1, 35, 36, 2504, 99999, 4194304])
def test_every_name_of_a_node_reads_back_its_pid_and_fits_an_interface_name(pid: int) -> None:
    tag = f"{base36(pid)}_{base36(99)}"
    names = [f"gmqb{tag}", f"gmqn{tag}_{base36(254)}", f"gmqv{tag}_{base36(254)}", f"gmqp{base36(pid)}_probe"]
    assert [owner_pid(n) for n in names] == [pid] * 4
    assert max(len(n) for n in names[:3]) <= 15


def test_only_names_of_processes_that_are_gone_are_stale() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert netns._stale(f"gmqn{base36(gone.pid)}_0_2")
    assert not netns._stale(f"gmqn{base36(os.getpid())}_0_2")
    assert not any(netns._stale(n) for n in ("eth0", "docker0", "gmq25040n4", "gmqbr250401"))
