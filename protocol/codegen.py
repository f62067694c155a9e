"""Regenerate the protobuf Python code (``make proto``).

graymq's own ``protocol/proto/*.proto`` go to ``protocol/``; the vendored RocketMQ 5 protos
(``protocol/proto/apache/rocketmq/v2/``, see the README there) go to ``protocol/rocketmq_v2/`` with the gRPC
service stubs, their ``apache.rocketmq.v2`` imports rewritten to that package's relative ones.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent / "proto"
OUT_DIR = Path(__file__).resolve().parent
ROCKETMQ_PROTOS = ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto")
ROCKETMQ_PACKAGE = "rocketmq_v2"  # under ``out_dir``

_UPSTREAM_IMPORT = re.compile(r"^from apache\.rocketmq\.v2 import (\w+)", re.MULTILINE)


def _protoc(args: list[str]) -> None:
    from grpc_tools import protoc  # dev extra only

    if protoc.main(["protoc", f"-I{PROTO_DIR}", *args]) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")


def generate(out_dir: Path = OUT_DIR) -> list[Path]:
    """Run protoc (from grpcio-tools) into ``out_dir``; return the files written."""
    protos = sorted(PROTO_DIR.glob("*.proto"))
    _protoc([f"--python_out={out_dir}", f"--pyi_out={out_dir}", *map(str, protos)])
    written = [out_dir / f"{p.stem}_pb2{ext}" for p in protos for ext in (".py", ".pyi")]
    return written + generate_rocketmq(out_dir / ROCKETMQ_PACKAGE)


def generate_rocketmq(package_dir: Path) -> list[Path]:
    """The RocketMQ 5 messages and ``MessagingService`` stubs, as one flat package in ``package_dir``."""
    import grpc_tools  # dev extra only

    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/duration.proto, timestamp.proto
    build = package_dir / "_build"
    build.mkdir(parents=True, exist_ok=True)
    _protoc([f"-I{well_known}", f"--python_out={build}", f"--pyi_out={build}", f"--grpc_python_out={build}",
             *(str(PROTO_DIR / p) for p in ROCKETMQ_PROTOS)])
    written = []
    for generated in sorted((build / "apache" / "rocketmq" / "v2").glob("*_pb2*.py*")):
        if generated.name.endswith("_grpc.py") and "class " not in generated.read_text():
            continue  # a proto without a service: its stub module would be empty
        target = package_dir / generated.name
        target.write_text(_UPSTREAM_IMPORT.sub(r"from . import \1", generated.read_text()))
        written.append(target)
    for path in sorted(build.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    build.rmdir()
    return written


if __name__ == "__main__":
    for path in generate():
        print(f"wrote {path}")
    sys.exit(0)
