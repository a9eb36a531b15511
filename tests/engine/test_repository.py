"""The repository layout, config.toml validation, versions, and models that fail to load."""

from __future__ import annotations

import numpy as np
import pytest

import conveyor
from conveyor import Engine, backends
from conveyor.examples import onnx_models
from conveyor.protocol.json_codec import dumps
from conveyor.repository import backend_catalog as registry
from conveyor.repository.config import parse_config
from tests.models import both_kinds


def test_config_is_read_from_the_onnx_file_when_absent(repo):
    repo.onnx("tiny", onnx_models.tiny)
    with Engine.from_repository(repo.path) as engine:
        info = engine.model("tiny")
    assert info.config.backend == "onnxruntime"
    assert info.platform == "onnxruntime_onnx"
    assert [(s.name, s.datatype, s.shape) for s in info.config.inputs] == [
        ("INPUT0", "FP32", (-1, 16))
    ]
    assert [(s.name, s.datatype, s.shape) for s in info.config.outputs] == [
        ("OUTPUT0", "FP32", (-1, 16))
    ]


def test_batch_dimension_is_stripped_when_max_batch_size_is_set(repo):
    repo.onnx("mlp", onnx_models.mlp, "max_batch_size = 16\n")
    with Engine.from_repository(repo.path) as engine:
        config = engine.model("mlp").config
    assert config.inputs[0].shape == (256,)
    assert config.outputs[0].shape == (16,)


def test_latest_version_is_served_by_default_and_versions_select_more(repo):
    for version in (1, 2, 3):
        repo.onnx("tiny", onnx_models.tiny, version=version)
    with Engine.from_repository(repo.path) as engine:
        assert engine.model("tiny").version == 3
        assert engine.model_versions("tiny") == [3]
    (repo.path / "tiny" / "config.toml").write_text("versions = [1, 3]\n")
    with Engine.from_repository(repo.path) as engine:
        assert engine.model_versions("tiny") == [1, 3]
        assert [(e.name, e.version, e.state) for e in engine.repository_index()] == [
            ("tiny", "1", "READY"),
            ("tiny", "3", "READY"),
        ]
        x = {"INPUT0": np.zeros((1, 16), np.float32)}
        assert engine.submit("tiny", x, version=1).result(5)["OUTPUT0"][0, 0] == 1.0
        # The future names the version serving it, so no caller looks the model up first.
        latest, first = engine.submit("tiny", x), engine.submit("tiny", x, version="1")
        assert (latest.model_name, latest.model_version) == ("tiny", "3")
        assert (first.model_name, first.model_version) == ("tiny", "1")
        latest.result(5), first.result(5)
        with pytest.raises(conveyor.ModelNotFound, match="no version 2"):
            engine.submit("tiny", x, version=2)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"backend": "onnxruntime", "max_batch": 4}, "unknown config key 'max_batch'"),
        ({"backend": "onnxruntime", "instances": 0}, "instances must be an integer >= 1"),
        ({"backend": "onnxruntime", "dynamic_batching": {}}, "needs max_batch_size > 0"),
        (
            {
                "backend": "onnxruntime",
                "max_batch_size": 4,
                "dynamic_batching": {"preferred_batch_sizes": [8]},
            },
            "preferred batch size 8 exceeds max_batch_size 4",
        ),
        (
            {"backend": "python", "inputs": [{"name": "X", "datatype": "FLOAT", "shape": [1]}]},
            "datatype 'FLOAT' is not one of",
        ),
        (
            {"backend": "python", "inputs": [{"name": "X", "datatype": "FP32", "shape": "1"}]},
            "shape must be a list of integers",
        ),
        ({"backend": "python", "inputs": [{"name": "X", "kind": 1}]}, "unknown key 'kind'"),
        ({"max_batch_size": 1}, "no backend"),
    ],
)
def test_bad_config_names_model_and_key(raw, message):
    with pytest.raises(conveyor.RepositoryError, match=message) as info:
        parse_config("m", raw)
    assert "model 'm'" in str(info.value)


def test_a_bad_model_does_not_stop_the_others(repo):
    repo.onnx("good", onnx_models.tiny)
    (repo.path / "typo").mkdir()
    (repo.path / "typo" / "config.toml").write_text('backend = "onnxruntime"\nmax_batchsize = 2\n')
    (repo.path / "typo" / "1").mkdir()
    broken = repo.path / "broken" / "1"
    broken.mkdir(parents=True)
    (broken / "model.onnx").write_bytes(b"this is not onnx")
    repo.python(
        "raises",
        "class Model:\n    def load(self, config):\n        raise RuntimeError('no GPU here')\n",
        '[[inputs]]\nname="X"\ndatatype="FP32"\nshape=[1]\n'
        '[[outputs]]\nname="Y"\ndatatype="FP32"\nshape=[1]\n',
    )
    with Engine.from_repository(repo.path) as engine:
        index = {entry.name: entry for entry in engine.repository_index()}
        assert index["good"].state == "READY"
        assert engine.ready
        assert "unknown config key 'max_batchsize'" in index["typo"].reason
        assert "could not load model.onnx" in index["broken"].reason
        assert "RuntimeError: no GPU here" in index["raises"].reason
        for name in ("typo", "broken", "raises"):
            assert index[name].state == "UNAVAILABLE"
            with pytest.raises(conveyor.ModelNotReady, match=f"model '{name}' is not ready"):
                engine.submit(name, {})
            # Failed to load: not transient, so not Unavailable (503); as Triton, which has
            # no version of it to serve, NOT_FOUND (404).
            with pytest.raises(conveyor.ModelUnavailable, match="failed to load") as caught:
                engine.submit(name, {})
            assert caught.value.kind is conveyor.ErrorKind.NOT_FOUND
            assert index[name].reason in caught.value.message
        assert [e.name for e in engine.failed_models()] == ["broken", "raises", "typo"]
        out = engine.submit("good", {"INPUT0": np.zeros((1, 16), np.float32)}).result(5)
        assert out["OUTPUT0"][0, 0] == 1.0


def test_model_names_cannot_leave_the_repository(repo):
    repo.onnx("tiny", onnx_models.tiny)
    engine = Engine.from_repository(repo.path, model_control="explicit")
    with engine:
        for name in ("../tiny", "..", "/etc", "tiny/../../x", "nope"):
            with pytest.raises(conveyor.ModelNotFound):
                engine.load_model(name)
            # Nothing is remembered about a name outside the repository.
            with pytest.raises(conveyor.ModelNotFound):
                engine.submit(name, {})
        assert [entry.name for entry in engine.repository_index()] == ["tiny"]
        assert engine.repository_index()[0].state == "UNAVAILABLE"


@both_kinds
def test_explicit_model_control_loads_and_unloads(repo):
    repo.onnx("tiny", onnx_models.tiny)
    repo.sleep_model(instances=1)
    with Engine.from_repository(
        repo.path, model_control="explicit", startup_models=["sleep"]
    ) as engine:
        assert engine.model_names() == ["sleep"]
        with pytest.raises(conveyor.ModelNotReady, match="not loaded") as caught:
            engine.submit("tiny", {"INPUT0": np.zeros((1, 16), np.float32)})
        assert not isinstance(caught.value, conveyor.ModelUnavailable)  # never asked to load
        engine.load_model("tiny")
        assert engine.model_names() == ["sleep", "tiny"]
        in_flight = engine.submit("sleep", {"INPUT0": np.array([0.3], np.float32)})
        engine.unload_model("sleep")  # finishes what it holds first
        assert in_flight.done() and in_flight.exception() is None
        with pytest.raises(conveyor.ModelNotReady, match="unloaded") as caught:
            engine.submit("sleep", {"INPUT0": np.array([0.0], np.float32)})
        assert not isinstance(caught.value, conveyor.ModelUnavailable)  # unloaded, not failed
        index = {entry.name: entry.state for entry in engine.repository_index()}
        assert index == {"sleep": "UNAVAILABLE", "tiny": "READY"}
        assert engine.failed_models() == []  # an unloaded model did not fail


def test_model_control_is_off_by_default(repo):
    repo.onnx("tiny", onnx_models.tiny)
    with Engine.from_repository(repo.path) as engine:
        with pytest.raises(conveyor.Unsupported, match="--model-control explicit"):
            engine.load_model("tiny")
        with pytest.raises(conveyor.Unsupported):
            engine.unload_model("tiny")


def test_onnx_session_options_are_validated(repo):
    repo.onnx("tiny", onnx_models.tiny, "[onnxruntime]\nintra_op_thread = 2\n")
    with Engine.from_repository(repo.path) as engine:
        (entry,) = engine.repository_index()
    assert "unknown key 'intra_op_thread' in [onnxruntime]" in entry.reason


def test_states_kinds_and_modes_are_enums_with_their_wire_words(repo):
    repo.onnx("tiny", onnx_models.tiny, "versions = [1, 2]\n", version=1)
    repo.onnx("tiny", onnx_models.tiny, version=2)
    with Engine.from_repository(repo.path, model_control="explicit") as engine:
        assert engine.model_control is conveyor.ModelControl.EXPLICIT
        assert [(e.version, e.state) for e in engine.repository_index()] == [
            ("", conveyor.ModelState.UNAVAILABLE)
        ]
        engine.load_model("tiny")
        index = engine.repository_index()
    # One entry per served version, from the engine's tuple of versions.
    assert [(e.version, e.state) for e in index] == [("1", "READY"), ("2", "READY")]
    assert all(e.state is conveyor.ModelState.READY for e in index)
    # The JSON both front ends write carries the plain words.
    assert dumps({"state": index[0].state}) == b'{"state":"READY"}'
    assert parse_config("m", {"backend": "python"}).instance_kind is conveyor.InstanceKind.THREAD
    kind = parse_config("m", {"backend": "python", "instance_kind": "process"}).instance_kind
    assert kind is conveyor.InstanceKind.PROCESS
    with pytest.raises(ValueError, match="model_control must be one of none, explicit"):
        Engine.from_repository(repo.path, model_control="sometimes")


def test_backend_facts_come_from_the_registry(monkeypatch):
    assert backends.platform("onnxruntime") == "onnxruntime_onnx"
    assert backends.platform("python") == "python"
    # Registered through the public call, on a copy of the table that the test then drops.
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))
    backends.register_backend("fake", backends.get_backend, "model.fake", platform="fake_platform")
    # A registered backend's options table is a known config key, and 'no backend' names it.
    config = parse_config("m", {"backend": "fake", "fake": {"threads": 2}})
    assert config.backend_options == {"threads": 2}
    assert backends.platform("fake") == "fake_platform"
    every = '"fake" or "onnxruntime" or "openvino" or "python"'
    with pytest.raises(conveyor.RepositoryError, match=every):
        parse_config("m", {})
    with pytest.raises(conveyor.RepositoryError, match="unknown config key 'other'"):
        parse_config("m", {"backend": "fake", "other": {}})


def test_explicit_model_control_loads_every_model_for_a_star(repo):
    # Triton's --load-model=* (its QA starts explicit-mode servers so).
    repo.onnx("tiny", onnx_models.tiny)
    repo.onnx("tiny2", onnx_models.tiny)
    with Engine.from_repository(
        repo.path, model_control="explicit", startup_models=["*"]
    ) as engine:
        assert engine.model_names() == ["tiny", "tiny2"]
        engine.unload_model("tiny2")  # still explicit: models load and unload on request
        assert engine.model_names() == ["tiny"]
