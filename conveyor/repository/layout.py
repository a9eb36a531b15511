"""Triton's repository layout: ``<repo>/<model>/[config.toml]`` and ``<repo>/<model>/<int>/``.

Reading the layout never loads a model; it only says what is there and what is wrong.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conveyor.backends import infer_backend
from conveyor.errors import ModelNotFound, RepositoryError
from conveyor.repository import checks
from conveyor.repository.checks import CONFIG_FILE
from conveyor.repository.checks import MODEL_NAME as _MODEL_NAME
from conveyor.repository.config import ModelConfig, load_config_file, parse_config, read_labels


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

    def version_dir(self, version: int) -> Path:
        return self.path / str(version)

    def check_version(self, version: int) -> None:
        """RepositoryError if the version's folder lacks its model file."""
        checks.check_version_folder(self.name, self.version_dir(version), self.config.backend)


class Repository:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise RepositoryError(f"model repository {str(self.root)!r} is not a directory")
        checks.check_root(self.root)

    def model_names(self) -> list[str]:
        return sorted(
            p.name for p in self.root.iterdir() if p.is_dir() and _MODEL_NAME.fullmatch(p.name)
        )

    def source(self, name: str) -> ModelSource:
        """Read one model's folder; RepositoryError says what is wrong with it."""
        if not _MODEL_NAME.fullmatch(name) or name in (".", ".."):
            raise ModelNotFound(f"{name!r} is not a valid model name")
        path = self.root / name
        if not path.is_dir():
            raise ModelNotFound(f"model {name!r} is not in the repository")
        available = sorted(int(p.name) for p in path.iterdir() if p.is_dir() and p.name.isdigit())
        raw = load_config_file(path / CONFIG_FILE, name) if (path / CONFIG_FILE).exists() else {}
        backend = None
        if "backend" not in raw:
            # The newest version with a model file: an empty latest folder must not hide it.
            found = (infer_backend(path / str(v)) for v in reversed(available))
            backend = next((b for b in found if b is not None), None)
            if backend is None:
                misplaced = checks.misplaced_model_file(name, path)
                if misplaced is not None:
                    raise misplaced
                if available:
                    raise checks.no_model_file(name, path, available)
                raise RepositoryError(f"model {name!r}: no version folders (e.g. {name}/1/)")
        config = read_labels(parse_config(name, raw, backend=backend), path)
        if not available:
            raise checks.misplaced_model_file(name, path) or RepositoryError(
                f"model {name!r}: no version folders (e.g. {name}/1/)"
            )
        fallbacks: tuple[int, ...] = ()
        if config.versions is None:
            versions: tuple[int, ...] = (available[-1],)
            fallbacks = tuple(reversed(available[:-1]))
        else:
            missing = sorted(set(config.versions) - set(available))
            if missing:
                raise RepositoryError(f"model {name!r}: versions {missing} have no folder")
            versions = tuple(sorted(config.versions))
        return ModelSource(name, path, config, versions, fallbacks)
