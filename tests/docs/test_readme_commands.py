"""The README's commands run as written, in a fresh directory, one line after the other."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_PORTS = (9876, 10911, 8081)  # what `graymq up` listens on (8081: the gRPC endpoint), as the READMEs say
# The README's blocks listen on fixed ports (these, 9877, 10921, 10931) and write /tmp/v2.jsonl: under pytest-xdist
# they share one worker (test_readme_stock_clients.py too), one block at a time.
README_GROUP = pytest.mark.xdist_group("readme_fixed_ports")

# the blocks' own deadlines (up to 600 s: a loaded machine) bound a test, not pytest-timeout's 300 s
pytestmark = [pytest.mark.e2e, README_GROUP, pytest.mark.timeout(660)]


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


def pasted_whole(lines: list[str]) -> str:
    """``lines`` as one paste into a terminal: no pause between them, a failing line does not stop the next; the
    paste exits as its last line did."""
    return "\n".join(["set +e", *lines, "pasted=$?", "set -e", "test $pasted -eq 0"])


def as_a_person_types(lines: list[str]) -> str:
    """A bash script of ``lines``; after each background command, wait for what a person would see."""
    return "\n".join(["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT", *waited(lines)]) + "\n"


def pasted_as_a_person(block: str, lines: list[str]) -> str:
    """``lines`` pasted whole, as ``pasted_whole``, waiting after each background command for what a person would
    see; a foreground line that exits otherwise than its comment says (``exit N``, else 0) is named and fails the
    paste."""
    script = ["set +e", "failed=0"]
    for line in waited(lines):
        script.append(line)
        if not line.split("#")[0].rstrip().endswith("&"):
            said = re.search(r"#.*\bexit (\d+)", line)
            expected = said.group(1) if said else "0"
            script.append(f"status=$?; [ $status -eq {expected} ] || {{ failed=1; "
                          f"echo {shlex.quote(f'{block}: exit')} $status {shlex.quote(line[:60])}; }}")
    return "\n".join([*script, "test $failed -eq 0 || exit 1", "set -e"]) + "\n"


def waited(lines: list[str]) -> list[str]:
    """``lines``, each background command followed by a wait for what a person would see (tests/docs/readme_wait.py)."""
    script = []
    started = 0
    for line in lines:
        script.append(line)
        if line.split("#")[0].rstrip().endswith("&"):
            started += " consume " in line or " run " in line
            script.append(f"{shlex.quote(sys.executable)} -m tests.docs.readme_wait {shlex.quote(line)} {started}")
    return script


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
    return run_script(tmp_path, as_a_person_types(lines), timeout)


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
    """In README order on one fresh data directory: *Try it by hand* (waiting where it says to), the rollout rehearsal
    pasted whole (it must wait for its own gray consumer), the Python example saved and run, the lanes of *Several
    releases at once* (two lanes, one promoted, one rolled back; then two lanes rolling out at once), then Security
    (its own name server with authentication on), TLS (its own servers, after stopping those above) and Replication
    (the dev cluster again, with a broker set of two), each pasted whole."""
    readme = ROOT / "README.md"
    (tmp_path / "example.py").write_text(code_block(readme, "## Python API", language="python"))
    blocks = {
        "rollout rehearsal": bash_block(readme, "## Cutover runbook", after="Rehearse it on the cluster of *Try it"),
        "python example": ["python example.py"],
        "lanes": bash_block(readme, "## Several releases at once"),
        "lane rollouts": bash_block(readme, "## Several releases at once", after="Two lanes rolling out at once"),
        "security": bash_block(readme, "## Security"),
        "tls": bash_block(readme, "### TLS"),
        "replication": bash_block(readme, "## Replication"),
    }
    script = as_a_person_types(bash_block(readme, "## Try it by hand")) + "".join(
        f"echo '--- {name}'\n" + pasted_as_a_person(name, lines) for name, lines in blocks.items())
    output = run_script(tmp_path, script, timeout=600)
    try_it, *rest = re.split(r"^--- [a-z ]+\n", output, flags=re.M)
    outputs = dict(zip(blocks, rest, strict=True))
    assert "SUCCEEDED" in try_it
    gray_deliveries = [line for line in try_it.splitlines() if line.startswith("{") and '"gray": true' in line
                       and '"client_id"' in line]
    assert len(gray_deliveries) == 10, try_it[-6000:]

    rehearsal = outputs["rollout rehearsal"]
    assert "ROLLED_BACK after 1 check(s)" in rehearsal and "rolled back at weight 10%" in rehearsal, rehearsal[-6000:]
    assert "RETIRED" in rehearsal and "FAILED" not in rehearsal, rehearsal[-6000:]
    assert not list(ROOT.glob("v[12].jsonl")) and (Path("/tmp") / "v2.jsonl").exists()  # scratch files outside

    # the background consumer of *Try it by hand* still prints to the same terminal: its JSON lines may land inside
    # the example's lines (a person reads past them; so does the test)
    example = re.sub(r'\{"body": [^\n]*?\}\n', "", outputs["python example"])
    assert re.search(r"sent \S+ SEND_OK$", example, re.M), example[-3000:]
    assert re.search(r"^consumed \S+ queue \d+ normal b'order-1'$", example, re.M), example[-3000:]

    lanes = outputs["lanes"]
    assert lanes.count("SUCCEEDED") == 2 and "FAILED" not in lanes, lanes[-6000:]
    assert "v2" in lanes and "v3" in lanes, lanes[-6000:]
    rollouts = outputs["lane rollouts"]
    assert re.search(r"rollout #\d+ of GID_SHIP \(lane v3\): HELD after 2 check\(s\)", rollouts), rollouts[-6000:]
    assert re.search(r"rollout #\d+ of GID_SHIP \(lane v2\): PROMOTED after 2 check\(s\)", rollouts), rollouts[-6000:]
    assert "rollout of lane v2" in rollouts and "FAILED" not in rollouts, rollouts[-6000:]

    security = outputs["security"]
    assert "name server listening on 127.0.0.1:9877" in security, security[-3000:]
    assert re.search(r"^(?=.*\borders\b)(?=.*ORDER_\*)", security, re.M), security[-3000:]  # principal list

    tls = outputs["tls"]
    assert "name server listening on 127.0.0.1:9876 over TLS" in tls, tls[-3000:]
    assert "broker broker-a serving on 127.0.0.1:10911 over TLS" in tls
    assert "served by broker-a" in tls and "SEND_OK" in tls
    consumed = [line for line in tls.splitlines() if line.startswith("broker-a:ORDERS:")]
    assert len(consumed) == 1 and consumed[0].endswith(" hello"), tls[-3000:]

    replication = outputs["replication"]
    replicas = re.findall(r"^broker-b\s+([01])\s+127\.0\.0\.1:109[23]1\s+(leader|follower)\s+yes", replication, re.M)
    assert sorted(role for _, role in replicas) == ["follower", "leader"], replication[-3000:]


@pytest.mark.spark
def test_the_spark_example_runs_as_written(tmp_path):
    output = run_block(tmp_path, bash_block(ROOT / "jobs" / "README.md", "## The example"), timeout=400)
    assert "SUCCEEDED" in output
    assert re.search(r"\|\s*PAID\s*\|\s*1\s*\|\s*12\.5", output), output[-4000:]


def test_the_readme_ports_are_checked_before_running():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert busy_ports((port,)) == [port]
        with pytest.raises(pytest.fail.Exception, match=f"port\\(s\\) {port} already in use"):
            require_readme_ports_free((port,))
