"""RepositoryWatch: which model folders changed and have settled, from file sizes and mtimes.

No sleeps: mtimes are set with os.utime, so every scan sees exactly the state written.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from conveyor.repository.watch import RepositoryWatch, model_fingerprint


def write(path: Path, data: bytes, mtime_ns: int = 1_000_000_000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_nothing_changed_nothing_reported(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.onnx", b"x")
    watch = RepositoryWatch(tmp_path)
    assert watch.scan() == []
    assert watch.scan() == []


def test_a_change_is_reported_once_two_scans_agree(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.onnx", b"x")
    watch = RepositoryWatch(tmp_path)
    write(tmp_path / "a" / "1" / "model.onnx", b"xy")  # new size
    assert watch.scan() == []  # seen once: may still be being written
    assert watch.scan() == ["a"]  # the same twice: settled
    assert watch.scan() == []  # reported once


def test_a_file_still_growing_is_not_reported(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.onnx", b"x")
    watch = RepositoryWatch(tmp_path)
    for size in range(2, 6):
        write(tmp_path / "a" / "1" / "model.onnx", b"x" * size)
        assert watch.scan() == []
    assert watch.scan() == ["a"]


def test_same_size_new_mtime_is_a_change(tmp_path: Path) -> None:
    write(tmp_path / "a" / "config.toml", b"x = 1")
    watch = RepositoryWatch(tmp_path)
    write(tmp_path / "a" / "config.toml", b"x = 2", mtime_ns=2_000_000_000)
    assert [watch.scan(), watch.scan()] == [[], ["a"]]


def test_added_and_removed_models_and_version_folders(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.onnx", b"x")
    write(tmp_path / "gone" / "1" / "model.onnx", b"x")
    watch = RepositoryWatch(tmp_path)
    write(tmp_path / "new" / "1" / "model.onnx", b"x")
    (tmp_path / "a" / "2").mkdir()  # an empty version folder counts
    shutil.rmtree(tmp_path / "gone")
    assert watch.scan() == []
    assert watch.scan() == ["a", "gone", "new"]
    assert watch.scan() == []


def test_a_change_undone_before_it_settled_is_not_reported(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.onnx", b"x")
    watch = RepositoryWatch(tmp_path)
    write(tmp_path / "a" / "1" / "model.onnx", b"xy")
    assert watch.scan() == []
    write(tmp_path / "a" / "1" / "model.onnx", b"x")  # back as it was loaded
    assert watch.scan() == []
    assert watch.scan() == []


def test_python_bytecode_is_not_a_change(tmp_path: Path) -> None:
    write(tmp_path / "a" / "1" / "model.py", b"x")
    before = model_fingerprint(tmp_path / "a")
    write(tmp_path / "a" / "1" / "__pycache__" / "model.cpython-312.pyc", b"bytecode")
    assert model_fingerprint(tmp_path / "a") == before


def test_non_model_names_are_ignored(tmp_path: Path) -> None:
    watch = RepositoryWatch(tmp_path)
    write(tmp_path / ".hidden" / "1" / "model.onnx", b"x")  # not a model name (leading dot)
    write(tmp_path / "README.md", b"x")
    assert [watch.scan(), watch.scan()] == [[], []]
