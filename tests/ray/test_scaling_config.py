"""A model's Ray Serve settings, from config.toml's [ray] and config.pbtxt's ray.* parameters.

Read by conveyor/repository, with or without Ray installed: no cluster here.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from conveyor.errors import RepositoryError
from conveyor.repository.layout import Repository
from conveyor.repository.ray_scaling import RayScaling
from tests.models import RepoBuilder

PBTXT = """
backend: "onnxruntime"
max_batch_size: 0
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [1, 16] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [1, 16] }}]
{parameters}
"""


def toml_model(tmp_path: Path, ray_table: str) -> RayScaling:
    RepoBuilder(tmp_path / "models").tiny()
    (tmp_path / "models" / "tiny" / "config.toml").write_text(textwrap.dedent(ray_table))
    return Repository(tmp_path / "models").source("tiny").config.ray


def pbtxt_model(tmp_path: Path, parameters: dict[str, str]) -> RayScaling:
    models = RepoBuilder(tmp_path / "models")
    models.tiny()
    entries = " ".join(
        f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}'
        for k, v in parameters.items()
    )
    (tmp_path / "models" / "tiny" / "config.pbtxt").write_text(PBTXT.format(parameters=entries))
    return Repository(tmp_path / "models").source("tiny").config.ray


def test_no_ray_table_is_one_replica(tmp_path: Path) -> None:
    scaling = toml_model(tmp_path, "")
    assert scaling == RayScaling()
    assert (scaling.min_replicas, scaling.max_replicas, scaling.autoscales) == (1, 1, False)


def test_toml_ray_table(tmp_path: Path) -> None:
    scaling = toml_model(
        tmp_path,
        """
        [ray]
        min_replicas = 2
        max_replicas = 8
        target_ongoing_requests = 4
        max_ongoing_requests = 32
        num_cpus = 0.5
        """,
    )
    assert scaling == RayScaling(
        min_replicas=2,
        max_replicas=8,
        target_ongoing_requests=4.0,
        max_ongoing_requests=32,
        num_cpus=0.5,
    )
    assert scaling.autoscales


def test_min_replicas_alone_sets_a_fixed_count(tmp_path: Path) -> None:
    scaling = toml_model(tmp_path, "[ray]\nmin_replicas = 3\n")
    assert (scaling.min_replicas, scaling.max_replicas) == (3, 3)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("ray = 3", "[ray] must be a table"),
        ("[ray]\nreplicas = 2", "unknown key [ray] replicas; known keys are"),
        ("[ray]\nmin_replicas = 0", "[ray] min_replicas must be an integer >= 1, got 0"),
        ("[ray]\nmin_replicas = 1.5", "[ray] min_replicas must be an integer >= 1, got 1.5"),
        (
            "[ray]\nmin_replicas = 3\nmax_replicas = 2",
            "[ray] max_replicas (2) must be >= [ray] min_replicas (3)",
        ),
        (
            "[ray]\ntarget_ongoing_requests = 0",
            "[ray] target_ongoing_requests must be a positive number, got 0",
        ),
        ("[ray]\nnum_cpus = true", "[ray] num_cpus must be a positive number, got True"),
        ("[ray]\nupscale_delay_s = -1", "[ray] upscale_delay_s must be a number >= 0, got -1"),
    ],
)
def test_toml_errors_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(RepositoryError) as error:
        toml_model(tmp_path, table)
    assert error.value.message.startswith("model 'tiny': ")
    assert message in error.value.message


def test_pbtxt_ray_parameters(tmp_path: Path) -> None:
    scaling = pbtxt_model(
        tmp_path,
        {"ray.min_replicas": "1", "ray.max_replicas": "4", "ray.target_ongoing_requests": "2.5"},
    )
    assert scaling == RayScaling(min_replicas=1, max_replicas=4, target_ongoing_requests=2.5)


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {"ray.max_replicas": "many"},
            "parameters['ray.max_replicas'] must be an integer >= 1, got 'many'",
        ),
        ({"ray.replicas": "2"}, "unknown key parameters['ray.replicas']"),
    ],
)
def test_pbtxt_errors_name_the_parameter(
    tmp_path: Path, parameters: dict[str, str], message: str
) -> None:
    with pytest.raises(RepositoryError) as error:
        pbtxt_model(tmp_path, parameters)
    assert "config.pbtxt parameters" in error.value.message
    assert message in error.value.message


def test_ray_parameters_are_not_backend_options(tmp_path: Path) -> None:
    pbtxt_model(tmp_path, {"ray.min_replicas": "2"})
    config = Repository(tmp_path / "models").source("tiny").config
    assert not any(key.startswith("ray") for key in config.backend_options)


def test_deployment_options_follow_the_settings(tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    from conveyor.ray.app import deployment_options

    fixed = toml_model(tmp_path / "a", "[ray]\nmin_replicas = 2\nnum_cpus = 0.5\n")
    config = Repository(tmp_path / "a" / "models").source("tiny").config
    options = deployment_options(dataclasses.replace(config, ray=fixed))
    assert options["num_replicas"] == 2
    assert "autoscaling_config" not in options
    assert options["ray_actor_options"] == {"num_cpus": 0.5}
    growing = RayScaling(min_replicas=1, max_replicas=4, target_ongoing_requests=3)
    options = deployment_options(dataclasses.replace(config, ray=growing))
    assert options["autoscaling_config"]["max_replicas"] == 4
    assert options["autoscaling_config"]["target_ongoing_requests"] == 3
    assert "num_replicas" not in options


def test_a_sequence_model_is_not_split_across_replicas(tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    from conveyor.ray.app import deployment_options
    from conveyor.repository.sequences import SequenceBatching

    toml_model(tmp_path, "")
    config = Repository(tmp_path / "models").source("tiny").config
    stateful = dataclasses.replace(
        config, sequence_batching=SequenceBatching(), ray=RayScaling(max_replicas=2)
    )
    with pytest.raises(RepositoryError, match="set its ray max_replicas to 1"):
        deployment_options(stateful)
