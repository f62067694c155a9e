"""The README's commands run as written, in a fresh directory: each block pasted whole, with no wait between its
lines but those it says itself."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_PORTS = (9876, 10911, 8081)  # what `graymq up` listens on (8081: the gRPC endpoint), as the READMEs say
# The README's blocks listen on fixed ports (these, 9877, 10921, 10931) and write /tmp/v2.jsonl: under pytest-xdist
# they share one worker, one block at a time.
README_GROUP = pytest.mark.xdist_group("readme_fixed_ports")

# the blocks' own deadlines (up to 900 s: a loaded machine) bound a test, not pytest-timeout's 300 s
pytestmark = [pytest.mark.e2e, README_GROUP, pytest.mark.timeout(960)]
STOCK = "## Stock RocketMQ clients"


def code_block(readme: Path, heading: str, after: str = "", language: str = "bash") -> str:
    """The first ```language block under ``heading`` (after the text ``after``, when given)."""
    text = readme.read_text()
    section = text[text.index(heading):]
    section = section[section.index(after):] if after else section
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block under {heading!r}"
    return match.group(1)


def bash_block(readme: Path, heading: str, after: str = "") -> list[str]:
    """The commands of the first ```bash block under ``heading`` (continued lines joined)."""
    joined = code_block(readme, heading, after).replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pasted_whole(block: str, lines: list[str]) -> str:
    """``lines`` as one paste into a terminal: no pause between them but what the lines themselves wait for, a
    failing line does not stop the next; a foreground line that exits otherwise than its comment says (``exit N``,
    else 0) is named and fails the paste."""
    script = ["set +e", "failed=0"]
    for line in lines:
        script.append(line)
        if not line.split("#")[0].rstrip().endswith("&"):
            said = re.search(r"#.*\bexit (\d+)", line)
            expected = said.group(1) if said else "0"
            script.append(f"status=$?; [ $status -eq {expected} ] || {{ failed=1; "
                          f"echo {shlex.quote(f'{block}: exit')} $status {shlex.quote(line[:60])}; }}")
    return "\n".join([*script, "test $failed -eq 0 || exit 1", "set -e"]) + "\n"


def pasted_in_order(blocks: dict[str, list[str]]) -> str:
    """A bash script pasting each block whole, in order, each announced by a ``--- NAME`` line; the background
    commands it started are stopped when it ends."""
    return "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + "".join(
        f"echo '--- {name}'\n" + pasted_whole(name, lines) for name, lines in blocks.items())


def outputs_of(output: str, blocks: dict[str, list[str]]) -> dict[str, str]:
    """What each block of ``pasted_in_order`` printed, by name."""
    _, *rest = re.split(r"^--- [a-z ]+\n", output, flags=re.M)
    return dict(zip(blocks, rest, strict=True))


def busy_ports(ports: tuple[int, ...]) -> list[int]:
    """The ports some process listens on (a socket in TIME_WAIT does not count, as for the servers)."""
    busy = []
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                busy.append(port)
    return busy


def require_readme_ports_free(ports: tuple[int, ...] = README_PORTS) -> None:
    """Fail at once when a cluster already runs on the README's fixed ports: the block would talk to it."""
    if busy := busy_ports(ports):
        pytest.fail(f"port(s) {', '.join(map(str, busy))} already in use (a local graymq cluster?): stop it "
                    "first, the README's commands use these fixed ports", pytrace=False)


def run_block(tmp_path: Path, lines: list[str], timeout: float = 240) -> str:
    return run_script(tmp_path, pasted_in_order({"block": lines}), timeout)


def run_script(tmp_path: Path, script: str, timeout: float = 240) -> str:
    require_readme_ports_free()
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "jobs").symlink_to(ROOT / "jobs")
    # a fresh shell's environment, but for the suite's small commit-log segments (tests/conftest.py): the README's
    # brokers would each preallocate 1 GiB, and nothing it shows depends on the size
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAYMQ_", "VIRTUAL_ENV")) or k == "GRAYMQ_BROKER_SEGMENT_SIZE"}
    env["PYTHONPATH"] = str(ROOT)
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # no venv on PATH: the README activates it
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, f"README block failed ({proc.returncode}):\n{output[-6000:]}"
    return output


def test_every_readme_block_runs_as_written_in_order(tmp_path):
    """In README order on one fresh data directory, each block pasted whole with no wait but its own: *Try it by
    hand*, the rollout rehearsal (it must wait for its own gray consumer), the Python example saved and run, the lanes
    of *Several releases at once* (two lanes, one promoted, one rolled back; then two lanes rolling out at once), the
    stock RocketMQ clients (their examples saved), all on the cluster *Try it by hand* started; then Security (its own
    name server with authentication on), TLS (its own servers, after stopping those above) and Replication (the dev
    cluster again, with a broker set of two)."""
    readme = ROOT / "README.md"
    (tmp_path / "example.py").write_text(code_block(readme, "## Python API", language="python"))
    (tmp_path / "stock_clients.py").write_text(code_block(readme, STOCK, language="python"))
    (tmp_path / "stock_clients.js").write_text(code_block(readme, STOCK, language="javascript"))
    blocks = {
        "try it": bash_block(readme, "## Try it by hand"),
        "rollout rehearsal": bash_block(readme, "## Cutover runbook", after="Rehearse it on the cluster of *Try it"),
        "python example": ["python example.py"],
        "lanes": bash_block(readme, "## Several releases at once"),
        "lane rollouts": bash_block(readme, "## Several releases at once", after="Two lanes rolling out at once"),
        "stock clients": bash_block(readme, STOCK),
        "security": bash_block(readme, "## Security"),
        "tls": bash_block(readme, "### TLS"),
        "replication": bash_block(readme, "## Replication"),
    }
    outputs = outputs_of(run_script(tmp_path, pasted_in_order(blocks), timeout=900), blocks)

    try_it = outputs["try it"]
    assert "SUCCEEDED" in try_it and "graymq local cluster up" in (tmp_path / "graymq-up.log").read_text()
    gray_deliveries = [line for line in try_it.splitlines() if line.startswith("{") and '"gray": true' in line
                       and '"client_id"' in line]
    assert len(gray_deliveries) == 10, try_it[-6000:]

    rehearsal = outputs["rollout rehearsal"]
    assert "ROLLED_BACK after 1 check(s)" in rehearsal and "rolled back at weight 10%" in rehearsal, rehearsal[-6000:]
    assert "RETIRED" in rehearsal and "FAILED" not in rehearsal, rehearsal[-6000:]
    assert not list(ROOT.glob("v[12].jsonl")) and (Path("/tmp") / "v2.jsonl").exists()  # scratch files outside

    example = outputs["python example"]
    assert re.search(r"sent \S+ SEND_OK$", example, re.M), example[-3000:]
    assert re.search(r"^consumed \S+ queue \d+ normal b'order-1'$", example, re.M), example[-3000:]

    lanes = outputs["lanes"]
    assert lanes.count("SUCCEEDED") == 2 and "FAILED" not in lanes, lanes[-6000:]
    assert "v2" in lanes and "v3" in lanes, lanes[-6000:]
    rollouts = outputs["lane rollouts"]
    assert re.search(r"rollout #\d+ of GID_SHIP \(lane v3\): HELD after 2 check\(s\)", rollouts), rollouts[-6000:]
    assert re.search(r"rollout #\d+ of GID_SHIP \(lane v2\): PROMOTED after 2 check\(s\)", rollouts), rollouts[-6000:]
    assert "rollout of lane v2" in rollouts and "FAILED" not in rollouts, rollouts[-6000:]

    stock = outputs["stock clients"]
    assert len(re.findall(r"^sent \w+$", stock, re.M)) == 2, stock[-4000:]
    # the Python SDK's consumer gets its own message; the Node.js SDK's, in a new group, both
    assert len(re.findall(r"^received order-1 paid paid eu$", stock, re.M)) == 2, stock[-4000:]
    assert len(re.findall(r"^received order-2 paid paid us$", stock, re.M)) == 1, stock[-4000:]

    security = outputs["security"]
    assert "name server listening on 127.0.0.1:9877" in (tmp_path / "nameserver-auth.log").read_text()
    assert re.search(r"^(?=.*\borders\b)(?=.*ORDER_\*)", security, re.M), security[-3000:]  # principal list

    tls = outputs["tls"]
    assert "name server listening on 127.0.0.1:9876 over TLS" in (tmp_path / "tls-nameserver.log").read_text()
    assert "broker broker-a serving on 127.0.0.1:10911 over TLS" in (tmp_path / "tls-broker.log").read_text()
    assert "served by broker-a" in tls and "SEND_OK" in tls, tls[-3000:]
    consumed = [line for line in tls.splitlines() if line.startswith("broker-a:ORDERS:")]
    assert len(consumed) == 1 and consumed[0].endswith(" hello"), tls[-3000:]

    replication = outputs["replication"]
    replicas = re.findall(r"^broker-b\s+([01])\s+127\.0\.0\.1:109[23]1\s+(leader|follower)\s+yes", replication, re.M)
    assert sorted(role for _, role in replicas) == ["follower", "leader"], replication[-3000:]
    assert "None" not in replication, replication[-3000:]  # broker-b has no gRPC endpoint: said so, not Python's None


@pytest.mark.spark
def test_the_spark_example_runs_as_written(tmp_path):
    output = run_block(tmp_path, bash_block(ROOT / "jobs" / "README.md", "## The example"), timeout=600)
    assert "SUCCEEDED" in output
    assert re.search(r"\|\s*PAID\s*\|\s*1\s*\|\s*12\.5", output), output[-4000:]


def test_the_readme_ports_are_checked_before_running():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert busy_ports((port,)) == [port]
        with pytest.raises(pytest.fail.Exception, match=f"port\\(s\\) {port} already in use"):
            require_readme_ports_free((port,))
