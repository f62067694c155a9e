"""Regenerate the protobuf Python code from ``protocol/proto/*.proto`` (``make proto``)."""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
OUT_DIR = Path(__file__).resolve().parent


def generate(out_dir: Path = OUT_DIR) -> list[Path]:
    """Run protoc (from grpcio-tools) into ``out_dir``; return the files written."""
    from grpc_tools import protoc  # dev extra only

    protos = sorted(PROTO_DIR.glob("*.proto"))
    args = ["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", *map(str, protos)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    return [out_dir / f"{p.stem}_pb2{ext}" for p in protos for ext in (".py", ".pyi")]


if __name__ == "__main__":
    for path in generate():
        print(f"wrote {path}")
    sys.exit(0)
