"""Triton's repository layout: ``<repo>/<model>/[config.toml]`` and ``<repo>/<model>/<int>/``.

Reading the layout never loads a model; it only says what is there and what is wrong.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from conveyor.backends import infer_backend
from conveyor.errors import ModelNotFound, RepositoryError
from conveyor.repository.config import ModelConfig, load_config_file, parse_config

CONFIG_FILE = "config.toml"
# Names that can be used in a URL path segment and never climb out of the repository
# (fullmatch: "$" alone would let a trailing newline through).
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What the repository holds for one model: its folder, config and versions to serve."""

    name: str
    path: Path
    config: ModelConfig
    versions: tuple[int, ...]

    def version_dir(self, version: int) -> Path:
        return self.path / str(version)


class Repository:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise RepositoryError(f"model repository {str(self.root)!r} is not a directory")

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
        if "backend" not in raw and available:
            backend = infer_backend(path / str(available[-1]))
        config = parse_config(name, raw, backend=backend)
        if not available:
            raise RepositoryError(f"model {name!r}: no version folders (e.g. {name}/1/)")
        if config.versions is None:
            versions: tuple[int, ...] = (available[-1],)
        else:
            missing = sorted(set(config.versions) - set(available))
            if missing:
                raise RepositoryError(f"model {name!r}: versions {missing} have no folder")
            versions = tuple(sorted(config.versions))
        return ModelSource(name, path, config, versions)
