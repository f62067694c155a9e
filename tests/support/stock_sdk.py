"""Run the stock RocketMQ 5 Python SDK (``stock_sdk_driver.py``) in its own process and read what it printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from graymq.devkit.lines import PipeLines

DRIVER = Path(__file__).with_name("stock_sdk_driver.py")


def _command(spec: dict[str, Any], host: str | None = None) -> list[str]:
    command = [sys.executable, str(DRIVER), json.dumps(spec)]
    return command if host is None else in_pod(host, command)


def in_pod(host: str, command: list[str]) -> list[str]:
    """``command`` run under the host name ``host``, in a UTS namespace of its own (as a pod's)."""
    return ["unshare", "--uts", "--map-root-user", "sh", "-c", 'hostname "$0" && exec "$@"', host, *command]


def printed_results(done: subprocess.CompletedProcess[str], driver: str) -> list[dict[str, Any]]:
    """The JSON lines a finished SDK driver printed after its ``client_id`` (or its one ``startup_error``)."""
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the {driver} driver printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    return [line for line in lines if "client_id" not in line]


def _env(home: Path, tls_ca: Path | None = None) -> dict[str, str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}  # HOME: where the SDK writes its logs
    if tls_ca is not None:  # the SDK verifies TLS against gRPC's default roots
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(tls_ca)
    return env


def sdk_send(endpoint: str, topic: str, messages: list[dict[str, Any]], home: Path, *, ak: str = "",
             sk: str = "", tls_ca: Path | None = None, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Send ``messages`` with the SDK's Producer; one result per message (``message_id``/``offset`` or ``error``),
    or a single ``startup_error``. ``home`` takes the SDK's log files; ``tls_ca``: connect over TLS trusting it."""
    spec = {"endpoint": endpoint, "topic": topic, "messages": messages, "ak": ak, "sk": sk, "tls": tls_ca is not None}
    done = subprocess.run(_command(spec), capture_output=True, text=True, timeout=timeout, env=_env(home, tls_ca))
    return printed_results(done, "Python SDK")


class StockSdkProcess:
    """An SDK driver as a running process (``host``: under that host name, in a UTS namespace of its own, as a pod):
    its lines as they come (``next``), a line on its stdin (``resume``, which stops a consumer)."""

    def __init__(self, spec: dict[str, Any], home: Path, host: str | None = None) -> None:
        self.proc = subprocess.Popen(_command(spec, host), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=_env(home))
        assert self.proc.stdout is not None
        self._lines = PipeLines(self.proc.stdout)

    def next(self, timeout: float = 30.0) -> dict[str, Any]:
        line = self._lines.next(timeout)
        assert line, f"the SDK driver exited ({self.proc.poll()}) before printing what was expected"
        return dict(json.loads(line))

    def printed(self) -> list[dict[str, Any]]:
        """Every line printed and not read yet, without waiting (the end of an exited driver is skipped)."""
        return [dict(json.loads(line)) for line in self._lines.ready()]

    def resume(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def end(self, timeout: float) -> None:
        """Ask it to end (a line on stdin), or kill it when it does not end within ``timeout``."""
        try:
            if self.proc.poll() is None:
                self.resume()
                self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class StockProducer(StockSdkProcess):
    """The SDK's Producer sending ``messages`` (``{"pause": true}`` waits for ``resume``)."""

    def __init__(self, endpoint: str, topic: str, messages: list[dict[str, Any]], home: Path, *,
                 host: str | None = None, interval_s: float = 0.0) -> None:
        super().__init__({"endpoint": endpoint, "topic": topic, "messages": messages, "interval_s": interval_s},
                         home, host)


class StockSimpleConsumer(StockSdkProcess):
    """The SDK's SimpleConsumer of ``topic`` in ``group``, one command at a time (the driver's ``consume`` mode):
    ``receive``, ``call`` (any command) and ``close``; ``started`` is its first line (``client_id`` or
    ``startup_error``)."""

    def __init__(self, endpoint: str, group: str, topic: str, home: Path, *, host: str | None = None,
                 await_s: int = 2, tags: str = "*", request_timeout_s: int = 5) -> None:
        consume = {"group": group, "topic": topic, "await": await_s, "tags": tags}
        super().__init__({"endpoint": endpoint, "consume": consume, "request_timeout": request_timeout_s}, home,
                         host)
        self.started = self.next(60.0)

    def call(self, command: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.next(timeout)

    def receive(self, max_messages: int = 32, invisible_s: int = 10, *, ack: bool = False) -> list[dict[str, Any]]:
        answer = self.call({"receive": max_messages, "invisible": invisible_s, "ack": ack})
        assert "messages" in answer, answer
        return list(answer["messages"])

    def close(self) -> None:
        """Shut the consumer down (an empty line), or kill it when it does not end in time."""
        self.end(20)


class StockPushConsumer(StockSdkProcess):
    """The SDK's PushConsumer of ``topic`` in ``group`` (the driver's ``push`` mode): its listener holds the bodies
    of ``hold`` that many seconds and those of ``block`` for ever; ``lines()`` what it printed so far (``received``
    and ``consumed``), ``received()`` the ``received`` lines alone."""

    def __init__(self, endpoint: str, group: str, topic: str, home: Path, *, host: str | None = None,
                 hold: dict[str, float] | None = None, block: tuple[str, ...] = ()) -> None:
        push = {"group": group, "topic": topic, "hold": hold or {}, "block": list(block)}
        super().__init__({"endpoint": endpoint, "push": push}, home, host)
        self.started = self.next(60.0)
        self.printed_lines: list[dict[str, Any]] = []

    def lines(self) -> list[dict[str, Any]]:
        self.printed_lines.extend(self.printed())
        return self.printed_lines

    def received(self) -> list[dict[str, Any]]:
        return [line for line in self.lines() if "received" in line]

    def close(self) -> None:
        """Shut it down (a line on stdin), or kill it when it does not end in time."""
        self.end(30)
        self.lines()


class StockRelay(StockSdkProcess):
    """A stock relay service (the driver's ``relay`` mode): the SDK's SimpleConsumer of ``topic`` in ``group``
    sending each message on to ``to``, its lane and trace context with it; ``relayed()`` what it printed so far."""

    def __init__(self, endpoint: str, group: str, topic: str, to: str, name: str, home: Path, *,
                 host: str | None = None) -> None:
        super().__init__({"endpoint": endpoint, "relay": {"group": group, "topic": topic, "to": to, "name": name}},
                         home, host)
        self.name = name
        self.started = self.next(60.0)
        self.lines: list[dict[str, Any]] = []

    def relayed(self) -> list[dict[str, Any]]:
        self.lines.extend(self.printed())
        return self.lines

    def close(self) -> None:
        """Stop relaying (a line on stdin), or kill it when it does not end in time."""
        self.end(30)
        self.relayed()


def sdk_log(home: Path) -> str:
    """What the SDK logged under ``home`` (the reasons of refused calls are there, not in its exceptions)."""
    return "".join(p.read_text() for p in sorted((home / "logs").rglob("*.log")))
