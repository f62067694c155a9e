"""``graymq consume`` stops on SIGINT even while it is still starting (the name server does not answer)."""

from __future__ import annotations

import signal

from graymq.devkit.processes import GraymqProcess
from tests.support.hung_server import hung_server


def test_sigint_while_starting_against_a_hung_nameserver_exits_cleanly() -> None:
    with hung_server() as nameserver:
        consumer = GraymqProcess(["consume", "TOPIC_HUNG", "--group", "G_HUNG", "--nameserver", nameserver.url])
        try:
            assert nameserver.connected.wait(30), consumer.output
            consumer.proc.send_signal(signal.SIGINT)
            assert consumer.proc.wait(10) == 0, consumer.output  # a generous bound: starting alone takes longer
            assert "Traceback" not in consumer.output
        finally:
            if consumer.proc.poll() is None:
                consumer.kill()
