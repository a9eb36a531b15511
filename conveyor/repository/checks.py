"""What a new repository gets wrong, said in words: misplaced folders and files, and what is
skipped without a word otherwise.

Two kinds of finding. ``check_root`` raises: a path that is a model folder or a version
folder instead of the repository can serve nothing, and saying "no backend" about it (or
nothing at all) sends the user looking in the wrong place. The ``*_warnings`` functions only
return sentences for the engine to log: the repository still serves what it can.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from conveyor.errors import ModelNotFound, RepositoryError
from conveyor.repository.backend_catalog import model_filenames, other_model_filenames
from conveyor.repository.config import ModelConfig
from conveyor.repository.pbtxt import PBTXT_FILE

CONFIG_FILE = "config.toml"
# Names that can be used in a URL path segment and never climb out of the repository
# (fullmatch: "$" alone would let a trailing newline through).
MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
MODEL_NAME_RULE = (
    "a model name starts with a letter, digit or _, then up to 127 letters, digits, _ . or -"
)


# The characters Triton's Python backend refuses in a model (stub) name, shell ones: a
# client matching its refusal looks for its words first.
TRITON_INVALID_CHARS = frozenset(";|&$`<>()[]{}\\\"'*?~#!")


def require_model_name(name: str) -> None:
    """ModelNotFound unless ``name`` can be a model's folder (never '..', never a path)."""
    if not MODEL_NAME.fullmatch(name):
        triton = (
            "Invalid stub name: contains invalid characters; "
            if (TRITON_INVALID_CHARS.intersection(name))
            else ""
        )
        raise ModelNotFound(f"{triton}{name!r} is not a valid model name")


def _version_folders(path: Path) -> list[str]:
    return sorted((p.name for p in path.iterdir() if p.is_dir() and p.name.isdigit()), key=int)


def check_root(root: Path) -> None:
    """RepositoryError if ``root`` is a version folder or a model folder, not a repository."""
    here = [name for name in model_filenames().values() if (root / name).is_file()]
    if here:
        raise RepositoryError(
            f"{str(root)!r} is a version folder (it holds {here[0]}), not a model repository; "
            f"give the repository, two levels up: {str(root.parent.parent)!r} "
            "(layout: <repository>/<model>/<version>/<model file>)"
        )
    folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    versions = _version_folders(root)
    configs = [f for f in (CONFIG_FILE, PBTXT_FILE) if (root / f).is_file()]
    if configs or (folders and len(versions) == len(folders)):
        holds = " and ".join(configs)
        if versions:
            listed = ", ".join(f"{v}/" for v in versions)
            holds = (
                f"{holds} and version folders {listed}" if holds else f"version folders {listed}"
            )
        raise RepositoryError(
            f"{str(root)!r} is a model folder (it holds {holds}), not a model repository; "
            f"give the folder above it: {str(root.parent)!r} "
            "(layout: <repository>/<model>/<version>/<model file>)"
        )


def misplaced_model_file(name: str, path: Path) -> RepositoryError | None:
    """A model file put directly in the model folder, where it is never looked for."""
    for filename in model_filenames().values():
        if (path / filename).is_file():
            return RepositoryError(
                f"model {name!r}: {filename} is directly in {name}/, outside any version "
                f"folder; move it into one: {name}/1/{filename}"
            )
    return None


def no_model_file(name: str, path: Path, versions: Sequence[int]) -> RepositoryError:
    """No version folder holds a model file, so there is no backend to infer."""
    looked = ", ".join(f"{name}/{v}/" for v in versions)
    expected = " or ".join(f"{f} ({b})" for b, f in model_filenames().items())
    return RepositoryError(
        f"model {name!r}: no model file in {looked}; expected {expected}, or set backend "
        f"in {name}/{CONFIG_FILE} (or platform/backend in {name}/{PBTXT_FILE})"
    )


def check_version_folder(
    name: str, version_dir: Path, backend: str, model_filename: str | None = None
) -> None:
    """RepositoryError if the version folder lacks the model file (the backend's, or the
    config's default_model_filename)."""
    filename = model_filename or model_filenames().get(backend)
    if filename is None or (version_dir / filename).exists():
        return
    if model_filename is None and any(
        (version_dir / other).exists() for other in other_model_filenames(backend)
    ):
        return
    held = sorted(p.name for p in version_dir.iterdir()) if version_dir.is_dir() else []
    what = f"holds only {', '.join(held[:5])}" if held else "is empty"
    raise RepositoryError(
        f"model {name!r}: version folder {name}/{version_dir.name}/ {what}; "
        f"expected {filename} ({backend})"
    )


def repository_warnings(root: Path) -> list[str]:
    """What the repository holds that will not be served, and would otherwise go unsaid."""
    folders = sorted(p.name for p in root.iterdir() if p.is_dir())
    warnings = [
        f"model repository {str(root)!r}: folder {name!r} is skipped: it is not a valid model "
        f"name ({MODEL_NAME_RULE})"
        for name in folders
        if not name.startswith(".") and not MODEL_NAME.fullmatch(name)
    ]
    if not any(MODEL_NAME.fullmatch(name) for name in folders):
        warnings.append(
            f"model repository {str(root)!r} holds no model folders; it serves nothing "
            "(layout: <repository>/<model>/<version>/<model file>)"
        )
    return warnings


# Config formats of other servers that Conveyor does not read (yet): kept apart so that
# reading one later only removes its line here. (Triton's config.pbtxt is read: pbtxt.py.)
_FOREIGN_CONFIGS = {
    "model-settings.json": "MLServer's model-settings.json",
}


def foreign_config_warnings(name: str, path: Path) -> list[str]:
    return [
        f"model {name!r}: {what} is ignored (not supported yet); write {name}/{CONFIG_FILE} instead"
        for filename, what in _FOREIGN_CONFIGS.items()
        if (path / filename).is_file()
    ]


def batch_dimension_warnings(config: ModelConfig) -> list[str]:
    """Shapes that seem to list the batch dimension, which max_batch_size > 0 already adds."""
    if not config.batching:
        return []
    return [
        f"model {config.name!r}: {spec.name} has shape {list(spec.shape)}, whose leading "
        f"{spec.shape[0]} looks like a batch dimension; with max_batch_size > 0 the shape "
        "excludes it (requests add it in front), so drop it if it is one"
        for spec in (*config.inputs, *config.outputs)
        if len(spec.shape) >= 2 and spec.shape[0] in (-1, 1)
    ]


def model_warnings(name: str, path: Path, config: ModelConfig) -> list[str]:
    return foreign_config_warnings(name, path) + batch_dimension_warnings(config)
