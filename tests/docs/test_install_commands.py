"""Every ``pip install`` that the README, the docs and Conveyor's own messages print is
spelt one way, and names only extras that pyproject.toml defines.

Conveyor is not on PyPI: it installs from a checkout, as ``pip install .`` or
``pip install '.[extra,...]'`` (quoted, so no shell globs the brackets). A message that says
``pip install 'conveyor[ray]'`` sends the reader to a package that does not exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.docs.doc_blocks import install_problems

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(p for p in (ROOT / "conveyor").rglob("*.py") if "_generated" not in p.parts),
]

_COMMAND = re.compile(r"pip install\b")
# Where a printed command ends: the end of a code span or string, a comment, the next
# command, or prose in parentheses.
_END = re.compile(r"[`\"#;()]|&&|\n")


def install_commands(text: str) -> list[str]:
    """The arguments of every ``pip install`` in ``text``, as printed (a mention of the
    command itself, `` `pip install` ``, is not one)."""
    found = []
    for match in _COMMAND.finditer(text):
        rest = text[match.end() :]
        if rest.startswith("`"):
            continue
        arguments = ""
        while True:
            end = _END.search(rest)
            piece = rest[: end.start() if end else len(rest)]
            arguments += " " + piece
            # Wrapped after "pip install" or its options (a docstring, a paragraph): the
            # command goes on on the next line.
            wrapped = end is not None and end.group() == "\n"
            if not (wrapped and all(w.startswith("-") for w in arguments.split())):
                break
            rest = rest[end.end() :]
        found.append(arguments.strip())
    return found


def _where(path: Path) -> str:
    return str(path.relative_to(ROOT))


COMMANDS = [
    (f"{_where(path)}:{arguments}", arguments)
    for path in SOURCES
    for arguments in install_commands(path.read_text(encoding="utf-8"))
]


def test_the_commands_are_found() -> None:
    assert len(COMMANDS) >= 15, COMMANDS
    assert install_commands("x `pip install '.[ray]'` y") == ["'.[ray]'"]
    assert install_commands("`pip install -e\n'.[test]'` z\n`pip install` w") == ["-e '.[test]'"]
    assert install_commands("\"plots: pip install\n'.[bench]' from a checkout\"") == [
        "'.[bench]' from a checkout"
    ]


@pytest.mark.parametrize(("where", "arguments"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_install_command_is_spelt_as_from_a_checkout(where: str, arguments: str) -> None:
    assert re.search(r"(?<!')\.\[", arguments) is None, (
        f"{where}: quote the project's extras as '.[extra]', got {arguments!r}"
    )
    # Prose may follow the command ("... from a checkout of Conveyor"): not targets.
    command = re.split(r"\s(?:in|from|to|beside|installs)\s", f" {arguments} ", maxsplit=1)[0]
    targets = shlex.split(command)
    assert targets, f"{where}: pip install with nothing to install: {arguments!r}"
    assert not install_problems(targets), (where, install_problems(targets))
