"""Every code example in README.md and docs/*.md runs as printed, against a real server.

The documents are read as they are: each fenced block is found with the HTML comment (if
any) on the line just before it, which says what to do with the block:

- ``<!-- file: models/NAME/... -->``: the block is a file of a model (config.toml,
  model.py). It is written into the repository the server serves, beside the built-in
  examples, so the walk-throughs' own models are the ones their requests reach.
- ``<!-- not-tested: why -->``: the block cannot run as printed (a fragment, a shell
  command that starts a server). It is reported as a skipped test with that reason, so
  nothing is left out silently.
- no comment: a ``python`` block runs as a script, a ``bash`` block whose every command is
  ``curl`` runs in bash; both must exit 0 (and curl must get no error answer). Other
  ``bash`` blocks are instructions (install, serve) and other languages are data; neither
  is run.

The examples address the default ports 127.0.0.1:8000/8001/8002. One server is started
for the whole module on free ports, and each block's addresses are rewritten to those
ports before it runs, so the printed examples stay exactly what a reader types.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor.examples import example_repository
from conveyor.testing import RunningServer, run_server

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK_TIMEOUT = 60  # seconds one example may take

# Each example is a fresh interpreter importing numpy and conveyor: ~20 s for them all.
pytestmark = pytest.mark.slow

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(file|not-tested):\s*(.+?)\s*-->\s*$")
_DEFAULT_ADDRESS = re.compile(r"\b(127\.0\.0\.1|localhost):(800[012])\b")


@dataclasses.dataclass(frozen=True)
class Block:
    document: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    marker: str | None  # "file" or "not-tested"
    argument: str | None  # the path, or the reason

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


def _is_curl_only(code: str) -> bool:
    commands = [
        line.strip()
        for line in code.replace("\\\n", " ").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    return bool(commands) and all(command.startswith("curl ") for command in commands)


ALL_BLOCKS = [block for document in DOCUMENTS for block in read_blocks(document)]
FILE_BLOCKS = [block for block in ALL_BLOCKS if block.marker == "file"]
RUNNABLE = [
    block
    for block in ALL_BLOCKS
    if block.marker != "file"
    and (block.language == "python" or (block.language == "bash" and _is_curl_only(block.code)))
]


def test_the_documents_have_examples() -> None:
    assert len(DOCUMENTS) > 10, DOCUMENTS
    assert sum(block.language == "python" and block.marker is None for block in RUNNABLE) >= 10
    for block in FILE_BLOCKS:
        assert block.argument is not None and block.argument.startswith("models/"), (
            f"{block.where}: a file block's path starts with models/, got {block.argument!r}"
        )


def _doc_repository(root: Path) -> Path:
    """The built-in examples plus every model the documents define, in ``root``/models."""
    repository = root / "models"
    shutil.copytree(example_repository(root / "cache"), repository)
    written: dict[str, Block] = {}
    for block in FILE_BLOCKS:
        assert block.argument is not None
        earlier = written.get(block.argument)
        if earlier is not None:
            assert earlier.code == block.code, (
                f"{block.where} and {earlier.where} print different {block.argument}"
            )
            continue
        written[block.argument] = block
        path = root / block.argument
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code, encoding="utf-8")
    return repository


@pytest.fixture(scope="module")
def doc_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    root = tmp_path_factory.mktemp("docs")
    repository = _doc_repository(root)
    with run_server(repository) as server:
        yield server, root


def _local(code: str, server: RunningServer) -> str:
    ports = {"8000": server.http_port, "8001": server.grpc_port, "8002": server.metrics_port}
    return _DEFAULT_ADDRESS.sub(lambda m: f"{m.group(1)}:{ports[m.group(2)]}", code)


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.where for block in RUNNABLE])
def test_example_runs_as_printed(block: Block, doc_server: tuple[RunningServer, Path]) -> None:
    if block.marker == "not-tested":
        pytest.skip(f"{block.where} is marked not-tested: {block.argument}")
    server, workdir = doc_server
    code = _local(block.code, server)
    if block.language == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
    )
    report = f"{block.where} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    if block.language == "bash":
        assert '"error"' not in result.stdout, report
