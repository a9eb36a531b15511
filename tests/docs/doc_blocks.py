"""The fenced code blocks of README.md and docs/*.md, with the marker comment before each,
and the check of ``pip install`` targets against pyproject.toml's extras.

tests/docs runs the blocks; tests/ray reads the Ray page's blocks with the same reader."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


_FENCE = re.compile(r"^```(\w*)\s*$")


_MARKER = re.compile(r"^<!--\s*(file|fragment|signature|server|not-tested):\s*(.+?)\s*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    document: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    marker: str | None  # "file", "fragment" or "not-tested"
    argument: str | None  # the path, the config file's name, or the reason

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def read_blocks(document: Path) -> list[Block]:
    """Every fenced block of ``document`` with the marker comment just before it."""
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{document.name}:{index + 1}: a code block is never closed")
        marker = _MARKER.match(lines[index - 1]) if index > 0 else None
        blocks.append(
            Block(
                document=document,
                line=index + 1,
                language=opening.group(1),
                code="\n".join(lines[index + 1 : end]) + "\n",
                marker=marker.group(1) if marker else None,
                argument=marker.group(2) if marker else None,
            )
        )
        index = end + 1
    return blocks


def project_extras() -> set[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


_PROJECT_TARGET = re.compile(r"^\.(?:\[(?P<extras>[\w,-]*)\])?$")


def install_problems(arguments: list[str]) -> list[str]:
    """What is wrong with a ``pip install`` command's targets (``arguments`` after it)."""
    extras = project_extras()
    problems = []
    for target in arguments:
        if target.startswith("-"):
            continue
        if re.match(r"^conveyor\b", target):
            problems.append(
                f"{target!r}: Conveyor is not on PyPI; install it from a checkout as '.[extra]'"
            )
            continue
        project = _PROJECT_TARGET.match(target)
        if project is None:
            continue  # another project's package (tritonclient, uvicorn)
        for extra in filter(None, (project.group("extras") or "").split(",")):
            if extra not in extras:
                problems.append(f"{target!r}: pyproject.toml has no extra {extra!r}")
    return problems
