"""``label_filename`` on an output (config.toml): read from the model's folder when the
model is read, shown in the model config, and every mistake named with the output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conveyor.errors import RepositoryError
from conveyor.repository.layout import Repository
from tests.models import RepoBuilder
from tests.server.compat.models import LABELS, SCORES_CONFIG, SCORES_MODEL

CONFIG = SCORES_CONFIG.format(max_batch_size=0, dim=-1)


def test_labels_are_read_with_the_model(compat_repository: Path) -> None:
    config = Repository(compat_repository).source("scores").config
    by_name = {spec.name: spec for spec in config.outputs}
    assert by_name["OUTPUT0"].label_filename == "labels.txt"
    assert by_name["OUTPUT0"].labels == LABELS
    assert by_name["OUTPUT1"].labels == ()


def test_the_model_config_names_the_label_file(client: Any, protocol: str) -> None:
    if protocol == "http":
        outputs = client.get_model_config("scores")["output"]
        assert [o.get("label_filename") for o in outputs] == ["labels.txt", None, None]
    else:
        outputs = client.get_model_config("scores").config.output
        assert [o.label_filename for o in outputs] == ["labels.txt", "", ""]


def test_the_server_says_it_classifies(client: Any, protocol: str) -> None:
    metadata = client.get_server_metadata()
    extensions = metadata["extensions"] if protocol == "http" else metadata.extensions
    assert "classification" in extensions


@pytest.mark.parametrize(
    ("config", "labels", "expected"),
    [
        (CONFIG, None, "output 'OUTPUT0': label_filename 'labels.txt' cannot be read"),
        (CONFIG.replace('"labels.txt"', '"../labels.txt"'), "x", "must be the name of a file"),
        (CONFIG.replace('"labels.txt"', "3"), "x", "label_filename must be the name"),
        (
            CONFIG.replace('shape = [-1]\n\n[[outputs]]', 'shape = [-1]\nlabel_filename = "a"\n\n'
                           '[[outputs]]', 1),
            "x",
            "unknown key 'label_filename' in inputs[0]",
        ),
    ],
    ids=["missing file", "a path", "not a string", "on an input"],
)  # fmt: skip
def test_label_file_mistakes_are_named(
    tmp_path: Path, config: str, labels: str | None, expected: str
) -> None:
    RepoBuilder(tmp_path).python("m", SCORES_MODEL, config)
    if labels is not None:
        (tmp_path / "m" / "labels.txt").write_text(labels)
    with pytest.raises(RepositoryError, match="model 'm'") as caught:
        Repository(tmp_path).source("m")
    assert expected in caught.value.message
