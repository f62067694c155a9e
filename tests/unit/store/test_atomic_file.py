"""atomic_file: the target holds the old or the new content, never a mix, and no temp file is left."""

from __future__ import annotations

import os

import pytest

from graymq.broker_ext.store import atomic_file
from graymq.broker_ext.store.atomic_file import read_json, write_atomic, write_json_atomic

pytestmark = pytest.mark.unit


def test_json_round_trips_and_a_missing_file_gives_the_default(tmp_path):
    path = tmp_path / "offsets.json"
    assert read_json(path, {"offsets": {}}) == {"offsets": {}}
    write_json_atomic(path, {"offsets": {"g@T@0": 12}})
    assert read_json(path, None) == {"offsets": {"g@T@0": 12}}
    write_json_atomic(path, {"offsets": {}})
    assert read_json(path, None) == {"offsets": {}}


def test_unreadable_json_names_the_file(tmp_path):
    path = tmp_path / "topics.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="topics.json"):
        read_json(path, {})


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failure_before_the_rename_keeps_the_old_content_and_leaves_no_temp_file(tmp_path, monkeypatch, failing):
    path = tmp_path / "config.json"
    write_atomic(path, b"old content")

    def boom(*args, **kwargs):
        raise OSError(5, "simulated I/O error")

    monkeypatch.setattr(atomic_file.os, failing, boom)
    with pytest.raises(OSError, match="simulated"):
        write_atomic(path, b"new content that never lands")
    assert path.read_bytes() == b"old content"
    assert os.listdir(tmp_path) == ["config.json"]


def test_the_data_is_fsynced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src, dst):
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(atomic_file.os, "fsync", fsync)
    monkeypatch.setattr(atomic_file.os, "replace", replace)
    write_atomic(tmp_path / "checkpoint", b"x")
    assert calls == ["fsync-file", "replace", "fsync-dir"]
    assert (tmp_path / "checkpoint").read_bytes() == b"x"
