"""``graymq broker moved-aside --store DIR [--republish] [--json]``: what a deposed replica moved aside, and
publishing it again (see ``moved_aside``). Exit 0; 1 when a file could not be read whole or a send failed."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from graymq.gray_controller.cli.common import add_nameserver_arg, print_json, setup_logging, table
from graymq.protocol.errors import ConfigError


def register(commands: Any) -> None:
    p = commands.add_parser(
        "moved-aside", help="list what this replica moved aside (a new leader lacked it); --republish sends it again",
        description="A replica of a broker set deposed under async replication moves the records the new leader "
                    "does not hold to STORE/moved-aside. This lists them (per file: epoch, offsets, messages per "
                    "topic); --republish publishes each again through the name server's routes (original msg id "
                    "as ORIGIN_MESSAGE_ID) and renames the file *.republished.")
    p.add_argument("--store", type=Path, required=True, help="the replica's store directory")
    p.add_argument("--republish", action="store_true", help="publish every message again, then mark the file done")
    p.add_argument("--json", action="store_true", help="print the files as JSON")
    add_nameserver_arg(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from graymq.gray_controller.cli.moved_aside import read_moved_aside

    setup_logging(default="WARNING")
    if not args.store.is_dir():
        raise ConfigError(f"no store directory {args.store}")
    files = read_moved_aside(args.store)
    failed = any(f.damaged for f in files)
    if args.republish and files:
        failed = asyncio.run(_republish(args, files)) or failed
    if args.json:
        print_json({"files": [f.to_json() for f in files]})
    elif not files:
        print(f"nothing moved aside in {args.store}")
    else:
        print(table([[f.path.name, f.epoch, f.start, f.end, len(f.messages),
                      ", ".join(f"{t} {n}" for t, n in f.to_json()["topics"].items()), f.damaged or "-"]
                     for f in files], ["file", "epoch", "from", "to", "messages", "topics", "damaged"]))
    return 1 if failed else 0


async def _republish(args: argparse.Namespace, files: list[Any]) -> bool:
    """Send every message of ``files`` again; a file whose messages all went is renamed. Whether a send failed."""
    from graymq.client import Message, Producer
    from graymq.gray_controller.cli.moved_aside import republish_fields
    from graymq.protocol.errors import GrayMQError

    producer = Producer("graymq-moved-aside", args.nameserver)
    await producer.start()
    failed = False
    try:
        for entry in files:
            sent = 0
            for message in entry.messages:
                try:
                    await producer.send(Message(**republish_fields(message)))
                    sent += 1
                except GrayMQError as exc:
                    print(f"republishing {message.msg_id} of {entry.path.name} failed: {exc.message}")
                    failed = True
            if sent == len(entry.messages) and not entry.damaged:
                entry.path.rename(entry.path.with_name(entry.path.name + ".republished"))
            print(f"{entry.path.name}: {sent} of {len(entry.messages)} messages published again")
    finally:
        await producer.stop()
    return failed
