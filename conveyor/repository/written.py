"""A model folder written from a load request's files (Triton's ``file:`` parameters).

The folder lives in a temporary directory of its own, outside the repository, for as long
as the model loaded from it is served; :func:`remove_written` deletes it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from conveyor.errors import InvalidInput
from conveyor.repository.checks import require_model_name

_PREFIX = "conveyor-load-"


def write_model_folder(name: str, files: Mapping[str, bytes]) -> Path:
    """``<tmp>/<name>/`` holding ``files`` (relative path -> content); returns that folder.

    A path that would leave the folder, or that the file system refuses, is InvalidInput
    naming it (the caller checked the paths' form already; this is the last guard); a name
    that is no model name (a path, '..') is ModelNotFound, before anything is written."""
    require_model_name(name)
    folder = Path(tempfile.mkdtemp(prefix=_PREFIX)) / name
    folder.mkdir()
    inside = folder.resolve()
    try:
        for relative, content in files.items():
            target = folder / relative
            if not target.resolve().is_relative_to(inside):
                raise InvalidInput(
                    f"Invalid file path 'file:{relative}': it leaves the model's folder"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                target.write_bytes(content)
            except OSError as exc:
                raise InvalidInput(f"Invalid file path 'file:{relative}': {exc.strerror}") from None
    except BaseException:
        remove_written(folder)
        raise
    return folder


def remove_written(folder: Path) -> None:
    """Delete a folder :func:`write_model_folder` made (and its temporary parent)."""
    parent = folder.parent
    if parent.name.startswith(_PREFIX):
        shutil.rmtree(parent, ignore_errors=True)
