"""A new user's repository mistakes, each said in words that name the mistake.

Misplaced files and folders fail with what is wrong (not "no backend"); what is skipped is
logged as a warning that names it; an empty latest version folder no longer hides the older
versions that load.
"""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

import conveyor
from conveyor import Engine
from conveyor.examples import onnx_models

TINY_INPUT = {"INPUT0": np.zeros((1, 16), np.float32)}


def entry(engine: Engine, name: str):  # type: ignore[no-untyped-def]
    return next(e for e in engine.repository_index() if e.name == name)


def test_a_model_file_outside_any_version_folder_is_named(repo):
    onnx_models.tiny(repo.path / "tiny" / "model.onnx")
    with Engine.from_repository(repo.path) as engine:
        reason = entry(engine, "tiny").reason
    assert "no backend" not in reason
    assert "model.onnx is directly in tiny/, outside any version folder" in reason
    assert "tiny/1/model.onnx" in reason


def test_the_same_when_an_empty_version_folder_is_beside_it(repo):
    onnx_models.tiny(repo.path / "tiny" / "model.onnx")
    (repo.path / "tiny" / "1").mkdir()
    with Engine.from_repository(repo.path) as engine:
        reason = entry(engine, "tiny").reason
    assert "model.onnx is directly in tiny/" in reason


def test_version_folders_without_a_model_file_are_named(repo):
    (repo.path / "tiny" / "1").mkdir(parents=True)
    (repo.path / "tiny" / "1" / "notes.txt").write_text("x")
    with Engine.from_repository(repo.path) as engine:
        reason = entry(engine, "tiny").reason
    assert "no backend" not in reason
    assert "no model file in tiny/1/" in reason
    assert "model.onnx (onnxruntime) or model.py (python)" in reason


def test_an_empty_latest_version_falls_back_to_the_newest_that_loads(repo, caplog):
    repo.onnx("tiny", onnx_models.tiny, version=1)
    repo.onnx("tiny", onnx_models.tiny, version=2)
    (repo.path / "tiny" / "3").mkdir()
    with caplog.at_level(logging.WARNING, "conveyor"), Engine.from_repository(repo.path) as engine:
        assert engine.model("tiny").version == 2
        assert engine.submit("tiny", TINY_INPUT).result(5)["OUTPUT0"][0, 0] == 1.0
        listed = entry(engine, "tiny")
    assert (listed.version, listed.state) == ("2", "READY")
    assert "version 3 failed to load" in listed.reason
    assert "version folder tiny/3/ is empty; expected model.onnx" in listed.reason
    assert "serving 2" in listed.reason
    logged = caplog.text
    assert "version 3 not loaded: model 'tiny': version folder tiny/3/ is empty" in logged
    assert "serving 2" in logged


def test_a_latest_version_that_fails_to_load_falls_back_too(repo):
    repo.onnx("tiny", onnx_models.tiny, version=1)
    (repo.path / "tiny" / "2").mkdir()
    (repo.path / "tiny" / "2" / "model.onnx").write_bytes(b"not onnx")
    with Engine.from_repository(repo.path) as engine:
        assert engine.model("tiny").version == 1
        assert "could not load model.onnx" in entry(engine, "tiny").reason


def test_listed_versions_do_not_fall_back(repo):
    repo.onnx("tiny", onnx_models.tiny, "versions = [2]\n", version=1)
    (repo.path / "tiny" / "2").mkdir()
    with Engine.from_repository(repo.path) as engine:
        listed = entry(engine, "tiny")
    assert listed.state == "UNAVAILABLE"
    assert "version folder tiny/2/ is empty" in listed.reason


def test_a_model_folder_given_as_the_repository_is_refused(repo):
    model = repo.onnx("tiny", onnx_models.tiny, 'backend = "onnxruntime"\n')
    with pytest.raises(conveyor.RepositoryError) as info:
        Engine.from_repository(model)
    message = info.value.message
    assert "is a model folder (it holds config.toml and version folders 1/)" in message
    assert f"give the folder above it: {str(repo.path)!r}" in message


def test_a_model_folder_without_config_is_refused_too(repo):
    model = repo.onnx("tiny", onnx_models.tiny)
    with pytest.raises(conveyor.RepositoryError, match=r"is a model folder \(it holds version"):
        Engine.from_repository(model)


def test_a_version_folder_given_as_the_repository_is_refused(repo):
    repo.onnx("tiny", onnx_models.tiny)
    with pytest.raises(conveyor.RepositoryError) as info:
        Engine.from_repository(repo.path / "tiny" / "1")
    message = info.value.message
    assert "is a version folder (it holds model.onnx), not a model repository" in message
    assert f"two levels up: {str(repo.path)!r}" in message


def test_the_cli_says_so_and_fails(repo):
    repo.onnx("tiny", onnx_models.tiny)
    for command, folder in (("models", "tiny/1"), ("serve", "tiny")):
        out = subprocess.run(
            [sys.executable, "-m", "conveyor", command, str(repo.path / folder)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode != 0, (command, out.stdout, out.stderr)
        assert "not a model repository" in out.stderr, out.stderr


def test_skipped_folders_and_foreign_configs_are_warned_about(repo, caplog):
    repo.onnx("tiny", onnx_models.tiny)
    (repo.path / "my model").mkdir()
    (repo.path / ".git").mkdir()  # hidden folders are nobody's model: no warning
    (repo.path / "tiny" / "model-settings.json").write_text("{}\n")
    with caplog.at_level(logging.WARNING, "conveyor"), Engine.from_repository(repo.path) as engine:
        assert engine.model_names() == ["tiny"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("folder 'my model' is skipped: it is not a valid model name" in w for w in warnings)
    assert any("a model name starts with a letter, digit or _" in w for w in warnings)
    assert not any(".git" in w for w in warnings)
    # config.pbtxt is read now (tests/repository/), so only MLServer's file is warned about.
    assert any("MLServer's model-settings.json is ignored" in w for w in warnings)


@pytest.mark.parametrize(("shape", "warned"), [([-1, 4], True), ([1, 4], True), ([4], False)])
def test_a_batch_dimension_in_shape_is_warned_about(repo, caplog, shape, warned):
    tensor = f'datatype = "FP32"\nshape = {shape}\n'
    repo.python(
        "echo",
        "class Model:\n    def infer(self, inputs):\n        return {'Y': inputs['X']}\n",
        f"max_batch_size = 8\n[[inputs]]\nname = 'X'\n{tensor}[[outputs]]\nname = 'Y'\n{tensor}",
    )
    with caplog.at_level(logging.WARNING, "conveyor"), Engine.from_repository(repo.path):
        pass
    found = [r.getMessage() for r in caplog.records if "looks like a batch dimension" in r.message]
    assert bool(found) == warned
    if warned:
        assert f"X has shape {shape}, whose leading {shape[0]} looks like" in found[0]
        assert "with max_batch_size > 0 the shape excludes it" in found[0]


def test_an_empty_repository_is_warned_about(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, "conveyor"), Engine.from_repository(tmp_path):
        pass
    assert "holds no model folders; it serves nothing" in caplog.text
