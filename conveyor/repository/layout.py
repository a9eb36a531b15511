"""Triton's repository layout: ``<repo>/<model>/[config.toml | config.pbtxt]`` and
``<repo>/<model>/<int>/``.

Reading the layout never loads a model; it only says what is there and what is wrong.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

from conveyor.errors import ModelNotFound, RepositoryError
from conveyor.repository import checks
from conveyor.repository.backend_catalog import infer_backend
from conveyor.repository.checks import CONFIG_FILE
from conveyor.repository.checks import MODEL_NAME as _MODEL_NAME
from conveyor.repository.config import ModelConfig, load_config_file, parse_config, read_labels
from conveyor.repository.ensemble import ENSEMBLE
from conveyor.repository.pbtxt import PBTXT_FILE, read_json_config, read_pbtxt


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What the repository holds for one model: its folder, config and versions to serve."""

    name: str
    path: Path
    config: ModelConfig
    versions: tuple[int, ...]
    # Older versions to serve instead, newest first, should every one of ``versions`` fail
    # to load (only when the config names no versions: serve the newest that loads).
    fallbacks: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()  # what the config holds that has no effect, for the log

    def version_dir(self, version: int) -> Path:
        return self.path / str(version)

    def check_version(self, version: int) -> None:
        """RepositoryError if the version's folder lacks its model file."""
        checks.check_version_folder(
            self.name, self.version_dir(version), self.config.backend, self.config.model_filename
        )


@dataclasses.dataclass(frozen=True)
class SourceOverride:
    """A load that brings its own config (JSON, Triton's form) and maybe its own folder
    (files the request carried, written by the engine) instead of the repository's."""

    config: str
    folder: Path | None = None


class Repository:
    """``gpu_on_cpu``: run config.pbtxt's KIND_GPU instance groups on the CPU (with a
    warning) instead of refusing the model."""

    def __init__(self, root: str | Path, *, gpu_on_cpu: bool = False) -> None:
        self.root = Path(root)
        self.gpu_on_cpu = gpu_on_cpu
        if not self.root.is_dir():
            raise RepositoryError(f"model repository {str(self.root)!r} is not a directory")
        checks.check_root(self.root)

    def model_names(self) -> list[str]:
        return sorted(
            p.name for p in self.root.iterdir() if p.is_dir() and _MODEL_NAME.fullmatch(p.name)
        )

    def source(self, name: str, override: SourceOverride | None = None) -> ModelSource:
        """Read one model's folder; RepositoryError says what is wrong with it.

        With ``override``, its config is read instead of the folder's config file, and its
        folder (if any) instead of the repository's."""
        checks.require_model_name(name)
        path = self.root / name
        if override is not None and override.folder is not None:
            path = override.folder
        if not path.is_dir():
            raise ModelNotFound(f"model {name!r} is not in the repository")
        available = sorted(int(p.name) for p in path.iterdir() if p.is_dir() and p.name.isdigit())
        # The newest version with a model file: an empty latest folder must not hide it.
        found = (infer_backend(path / str(v)) for v in reversed(available))
        inferred = next((b for b in found if b is not None), None)
        if override is None:
            config, warnings = self._config(name, path, inferred, available)
        else:
            no_backend = functools.partial(self._no_backend, name, path, available)
            read = read_json_config(
                override.config,
                name,
                path,
                backend=inferred,
                no_backend=no_backend,
                gpu_on_cpu=self.gpu_on_cpu,
            )
            config, warnings = read.config, read.warnings
        config = read_labels(config, path)
        if not available and config.backend == ENSEMBLE:
            available = [1]  # Triton wants an empty 1/ beside an ensemble's config; not needed
        if not available:
            raise checks.misplaced_model_file(name, path) or RepositoryError(
                f"model {name!r}: no version folders (e.g. {name}/1/)"
            )
        fallbacks: tuple[int, ...] = ()
        if config.versions is None:
            newest = config.latest_versions or len(available)
            versions: tuple[int, ...] = tuple(available[-newest:])
            if newest == 1:
                fallbacks = tuple(reversed(available[:-1]))
        else:
            missing = sorted(set(config.versions) - set(available))
            if missing:
                raise RepositoryError(f"model {name!r}: versions {missing} have no folder")
            versions = tuple(sorted(config.versions))
        return ModelSource(name, path, config, versions, fallbacks, warnings)

    @staticmethod
    def _no_backend(name: str, path: Path, available: list[int]) -> RepositoryError:
        """The error for a config that names no backend beside no model file that would."""
        misplaced = checks.misplaced_model_file(name, path)
        if misplaced is not None:
            return misplaced
        if available:
            return checks.no_model_file(name, path, available)
        return RepositoryError(f"model {name!r}: no version folders (e.g. {name}/1/)")

    def _config(
        self, name: str, path: Path, inferred: str | None, available: list[int]
    ) -> tuple[ModelConfig, tuple[str, ...]]:
        """The model's config.toml or config.pbtxt (never both), or one filled in from the
        model file; ``inferred`` is the backend whose model file is there, if any."""
        no_backend = functools.partial(self._no_backend, name, path, available)

        toml, pbtxt = path / CONFIG_FILE, path / PBTXT_FILE
        if toml.is_file() and pbtxt.is_file():
            raise RepositoryError(
                f"model {name!r}: both {name}/{CONFIG_FILE} and {name}/{PBTXT_FILE} exist; "
                "keep one (Conveyor reads either, never both)"
            )
        if pbtxt.is_file():
            read = read_pbtxt(
                pbtxt, name, backend=inferred, no_backend=no_backend, gpu_on_cpu=self.gpu_on_cpu
            )
            return read.config, read.warnings
        raw = load_config_file(toml, name) if toml.is_file() else {}
        if "backend" not in raw and inferred is None:
            raise no_backend()
        return parse_config(name, raw, backend=inferred), ()
