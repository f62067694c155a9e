"""``graymq broker verify``: check a stopped broker's store offline, and repair it on demand.

Exit status: 0 clean, 1 damage found (repaired or not), 2 the store cannot be read (no such
directory, not a store, unreadable, or a running broker holds it).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graymq.gray_controller.cli.common import print_json, setup_logging, table


def register(commands: Any) -> None:
    """Add ``verify`` to the subcommands of ``graymq broker`` (which without one runs a broker, as before)."""
    p = commands.add_parser(
        "verify", help="check a stopped broker's store: holes, torn tail, consume queues, index",
        description="Check a stopped broker's store without changing it: scan the whole commit log for damaged "
                    "records (holes) and a torn tail, and check consume queues and key index against it. "
                    "Exit status: 0 clean, 1 damage found, 2 the store cannot be read or a broker is running on it.",
    )
    p.add_argument("--store", type=Path, required=True, help="the broker's store directory")
    p.add_argument("--repair", action="store_true",
                   help="apply what recovery would (cut a torn tail, rebuild queues and index, record holes) and "
                        "report it; holes stay holes: their messages are lost")
    p.add_argument("--json", action="store_true", help='print {"clean", "holes", "torn_tail", ...} as JSON')
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from graymq.broker_ext.store.verify import verify_store

    setup_logging(default="WARNING")
    report = verify_store(args.store, repair=args.repair)
    doc = report.to_json()
    if args.json:
        print_json(doc)
    else:
        print(_human(doc, args.store))
    return 0 if report.clean else 1


def _human(doc: dict[str, Any], store: Path) -> str:
    lines = []
    if doc["holes"]:
        lines.append(table([[h["file"], h["offset"], h["length"], "yes" if h["recorded"] else "no", h["reason"]]
                            for h in doc["holes"]], ["HOLE IN", "OFFSET", "BYTES", "RECORDED", "REASON"]))
    if doc["torn_tail"]:
        tail = doc["torn_tail"]
        lines.append(f"torn tail: {tail['file']} from offset {tail['offset']} ({tail['reason']})")
    findings = doc["consume_queues"] + doc["index"]
    if findings:
        lines.append(table([[f["file"], f["first"], f["count"], f["reason"]] for f in findings],
                           ["FILE", "FIRST", "COUNT", "PROBLEM"]))
    problems = len(doc["holes"]) + (1 if doc["torn_tail"] else 0) + len(findings)
    if doc["clean"]:
        verdict = "clean"
    elif doc["repaired"]:
        verdict = f"{problems} problem(s) found and repaired"
        if doc["holes"]:
            verdict += f"; {len(doc['holes'])} hole(s) recorded: their messages are lost"
    else:
        verdict = f"{problems} problem(s) found"
        if not doc["clean_stop"]:
            verdict += " (the broker did not stop cleanly)"
        if doc["torn_tail"] or findings or not all(h["recorded"] for h in doc["holes"]):
            verdict += "; --repair applies what recovery would"
    lines.append(f"store {store}: {verdict}")
    return "\n\n".join(lines)
