"""The reference pages list what the code has: every serve option, every config.toml key.

The option list is generated from ``conveyor.server.settings.Settings`` (the same source as
``conveyor serve --help``) and the config keys from ``conveyor.ModelConfig``'s fields, so a
new option or key that the docs do not mention fails here.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from conveyor import ModelConfig
from conveyor.repository.backend_catalog import backend_names
from conveyor.server.settings import add_arguments

DOCS = Path(__file__).resolve().parents[2] / "docs"

# The ModelConfig fields that only config.pbtxt sets (config.toml has no key for them) are
# documented on docs/triton-migration.md.
MIGRATION = DOCS / "triton-migration.md"
PBTXT_ONLY_FIELDS = {
    "allow_timeout_override",
    "default_timeout_s",
    "ignored_parameters",
    "instance_groups",
    "latest_versions",
    "model_filename",
    "warmup",
}

# An ensemble's steps (config.toml's [[steps]] tables) are documented on docs/ensembles.md.
ENSEMBLES = DOCS / "ensembles.md"
ENSEMBLE_FIELDS = {"ensemble_steps": "[[steps]]"}


def test_serving_lists_every_option_of_conveyor_serve() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = [
        option
        for action in parser._actions  # argparse has no public list of its options
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert "--http-port" in options
    page = (DOCS / "serving.md").read_text(encoding="utf-8")
    missing = [option for option in options if f"`{option}" not in page]
    assert not missing, f"docs/serving.md does not list {missing}"


# Keys documented on their feature's own page rather than on docs/configuration.md.
OWN_PAGES = {"sequence_batching": DOCS / "sequences.md"}


def test_configuration_lists_every_config_key() -> None:
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for key, own_page in OWN_PAGES.items():
        assert f"[{key}]" in own_page.read_text(encoding="utf-8"), f"{own_page} lacks {key}"
    keys = {field.name for field in dataclasses.fields(ModelConfig)} - {"name"} - PBTXT_ONLY_FIELDS
    keys -= set(ENSEMBLE_FIELDS)
    keys -= set(OWN_PAGES)
    # backend_options is the table named after the backend.
    keys = (keys - {"backend_options"}) | {"[onnxruntime]", "[python]"}
    missing = sorted(key for key in keys if key not in page)
    assert not missing, f"docs/configuration.md does not mention {missing}"
    migration = MIGRATION.read_text(encoding="utf-8")
    missing = sorted(field for field in PBTXT_ONLY_FIELDS if f"`{field}`" not in migration)
    assert not missing, f"docs/triton-migration.md does not mention {missing}"
    ensembles = ENSEMBLES.read_text(encoding="utf-8")
    missing = sorted(key for key in ENSEMBLE_FIELDS.values() if f"`{key}`" not in ensembles)
    assert not missing, f"docs/ensembles.md does not mention {missing}"


def test_migration_names_every_backend_a_config_pbtxt_may_ask_for() -> None:
    # The backend row of the field table names each backend Conveyor serves, and no clause
    # of it that says "refused" names one of them.
    row = next(
        line
        for line in MIGRATION.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `backend` |")
    )
    refusals = [clause for clause in row.split(";") if "refused" in clause]
    for name in backend_names():
        assert f"`{name}`" in row, f"triton-migration.md's backend row omits {name!r}: {row}"
        for clause in refusals:
            assert f"`{name}`" not in clause, f"triton-migration.md refuses {name!r}: {clause}"
