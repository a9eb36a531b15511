"""Every code example in README.md and docs/*.md runs as printed, against a real server.

The documents are read as they are: each fenced block is found with the HTML comment (if
any) on the line just before it, which says what to do with the block:

- ``<!-- file: models/NAME/... -->``: the block is a file of a model (config.toml,
  model.py). It is written into the ``models/`` folder of its document's working folder,
  so ``conveyor serve models/`` on that page serves what the page defines, and nothing else.
- ``<!-- fragment: config.toml -->`` (or ``config.pbtxt``): the block is part of a model's
  configuration, or all of it. It is added to a small Python model's configuration (its
  TOML keys and tables replacing the model's) and read with Conveyor's own reader, which
  must accept it. A ``config.pbtxt`` that names its model (``name: ...``) is read whole.
- ``<!-- signature: engine=conveyor.Engine -->``: the block prints calls as signatures
  (``engine.submit(model, inputs, *, version=None)``). Each must list the parameters of the
  callable it names, in order, with their kinds and defaults; the comment binds the names
  that are not modules (here ``engine`` to ``conveyor.Engine``).
- ``<!-- server: http -->``: a ``python`` block that serves V2 HTTP until stopped (an ASGI
  host, say). It runs in the background on a free port (``port=8000`` and the addresses
  rewritten) and must answer ``/v2/health/ready``; the page's later blocks reach it; at the
  page's end it gets SIGTERM and must exit 0.
- ``<!-- not-tested: why -->``: the block cannot run here (it needs a container engine, or
  runs benchmarks for minutes). It is reported as a skipped test with that reason, so
  nothing is left out silently.
- no comment: a ``python`` block runs as a script and a ``bash`` block runs command by
  command (below); both must finish within ``BLOCK_TIMEOUT`` and exit 0 (and curl must get
  no error answer). Blocks of other languages are data and are not run.

The blocks of one document run in order in one working folder, as a reader types them:

- ``conveyor serve ...`` (alone, after ``&&``, with ``&`` or under ``taskset``) starts that
  server in the background, on free ports and on loopback whatever ``--host`` says; the
  document's later blocks reach it, until its next ``conveyor serve`` replaces it or the
  document ends. Before a document starts one, its blocks reach a server of the built-in
  examples plus every model the documents define.
- ``pip install ...`` is not run (it would change the test environment): each project
  target must be spelled ``.`` or ``'.[extra,...]'`` with extras pyproject.toml defines
  (``test_install_commands`` checks the same of every ``pip install`` anywhere).
- every other command runs in bash in the document's working folder.

The examples address the default ports 127.0.0.1:8000/8001/8002; each block's addresses are
rewritten to the ports of the server it reaches, so the printed examples stay exactly what
a reader types.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import inspect
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conveyor.examples import example_repository
from conveyor.repository.config import parse_config
from conveyor.repository.layout import Repository
from conveyor.server.settings import add_arguments
from conveyor.testing import RunningServer, free_port, run_server, wait_ready
from tests.docs.doc_blocks import Block, install_problems, read_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK_TIMEOUT = 60  # seconds one example may take; one that takes longer hangs: a failure

# Each example is a fresh interpreter importing numpy and conveyor: ~20 s for them all.
pytestmark = pytest.mark.slow

_DEFAULT_ADDRESS = re.compile(r"\b(127\.0\.0\.1:|localhost:|port=)(800[012])\b")


ALL_BLOCKS = [block for document in DOCUMENTS for block in read_blocks(document)]
FILE_BLOCKS = [block for block in ALL_BLOCKS if block.marker == "file"]
FRAGMENTS = [block for block in ALL_BLOCKS if block.marker == "fragment"]
SIGNATURES = [block for block in ALL_BLOCKS if block.marker == "signature"]
RUNNABLE = [
    block
    for block in ALL_BLOCKS
    if block.marker not in ("file", "fragment", "signature")
    and block.language in ("python", "bash")
]


# --- the commands of a bash block -------------------------------------------------------


def commands(code: str) -> list[str]:
    """The commands of a bash block, as printed: split at newlines and ``&&`` outside quotes
    (a quoted argument may span lines; a backslash joins lines), comments dropped."""
    found: list[str] = []
    current: list[str] = []
    quote = ""  # the quote character we are inside, if any
    index = 0

    def finish() -> None:
        command = "".join(current).strip()
        if command:
            found.append(command)
        current.clear()

    while index < len(code):
        char = code[index]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                current.append(code[index : index + 2])
                index += 2
                continue
        elif char in "'\"":
            quote = char
        elif char == "\\" and code[index + 1 : index + 2] == "\n":
            index += 2  # a continuation: the command goes on
            current.append(" ")
            continue
        elif char == "#" and (not current or current[-1][-1:].isspace()):
            while index < len(code) and code[index] != "\n":
                index += 1  # a comment, to the end of the line
            continue
        elif char == "\n" or code.startswith("&&", index):
            finish()
            index += 1 if char == "\n" else 2
            continue
        current.append(char)
        index += 1
    assert not quote, f"a quote is never closed in:\n{code}"
    finish()
    return found


def serve_arguments(command: str) -> list[str] | None:
    """The arguments after ``conveyor serve`` when ``command`` starts a server, else None."""
    words = shlex.split(command)
    if words[:1] == ["taskset"]:
        words = words[3:]  # taskset -c CPUS conveyor serve ...
    if words[-1:] == ["&"]:
        words = words[:-1]
    elif words and words[-1].endswith("&"):
        words[-1] = words[-1][:-1]
    if words[:2] != ["conveyor", "serve"]:
        return None
    return words[2:]


# --- one server per document session ----------------------------------------------------


@dataclasses.dataclass
class Session:
    """A document's working folder and the server its blocks reach at this point."""

    workdir: Path
    server: RunningServer
    stack: contextlib.ExitStack  # the document's own server, once it starts one


def _write_files(root: Path, blocks: list[Block]) -> None:
    written: dict[str, Block] = {}
    for block in blocks:
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


def _shared_repository(root: Path) -> Path:
    """The built-in examples plus every model the documents define, in ``root``/models."""
    repository = root / "models"
    shutil.copytree(example_repository(root / "cache"), repository)
    _write_files(root, FILE_BLOCKS)
    return repository


class Sessions:
    def __init__(self, root: Path, shared: RunningServer, examples: Path) -> None:
        self.root = root
        self.shared = shared
        self.shared_repository = examples
        self.by_document: dict[Path, Session] = {}

    def get(self, document: Path) -> Session:
        session = self.by_document.get(document)
        if session is None:
            workdir = self.root / document.stem
            workdir.mkdir()
            own = [b for b in FILE_BLOCKS if b.document == document]
            _write_files(workdir, own)
            if not own:
                # A page that serves models/ without defining any: the reader's own
                # repository, here the built-in examples.
                shutil.copytree(self.shared_repository, workdir / "models")
            session = Session(workdir, self.shared, contextlib.ExitStack())
            self.by_document[document] = session
        return session

    def serve(self, session: Session, arguments: list[str]) -> None:
        """Stop the document's server (if it started one) and start ``conveyor serve
        ARGUMENTS`` in its place, on free loopback ports."""
        session.stack.close()
        # Ports and host are run_server's to choose (free ports, loopback only); the rest
        # is given as printed, the repository resolved in the document's folder.
        kept: list[str] = []
        words = iter(arguments)
        for word in words:
            if word.split("=", 1)[0] in ("--host", "--http-port", "--grpc-port", "--metrics-port"):
                if "=" not in word:
                    next(words)
            else:
                kept.append(word)
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        # parse_known_args: --log-level is the CLI's, not a serve setting.
        named = getattr(parser.parse_known_args(kept)[0], "repository", None)
        repository = None if named is None else session.workdir / named
        if named is not None:
            kept.remove(named)
        session.server = session.stack.enter_context(
            run_server(repository, extra_args=kept, ready_timeout=BLOCK_TIMEOUT)
        )

    def serve_python(self, session: Session, block: Block) -> None:
        """Run ``block`` (a Python server) in the background as the document's server."""
        session.stack.close()
        port = free_port()
        server = RunningServer(
            subprocess.Popen(
                [sys.executable, "-c", _local(block.code, port, port, port)],
                cwd=session.workdir,
                env=_environment(),
            ),
            port,
            port,
            port,
        )

        def stop() -> None:
            code = server.stop()
            # uvicorn raises the signal again once it has shut down: -SIGTERM is a clean
            # stop too. A server that ignored it was killed (-SIGKILL) after 30 s.
            assert code in (0, -signal.SIGTERM), (
                f"{block.where}: the server exited {code} on SIGTERM"
            )

        session.stack.callback(stop)
        wait_ready(server.http_url, BLOCK_TIMEOUT, server.process)
        session.server = server

    def close(self) -> None:
        # Every page's server stops, even when stopping one of them fails.
        with contextlib.ExitStack() as every:
            for session in self.by_document.values():
                every.push(session.stack)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sessions]:
    root = tmp_path_factory.mktemp("docs")
    repository = _shared_repository(root / "shared")
    examples = example_repository(root / "cache")
    with run_server(repository) as server:
        all_sessions = Sessions(root, server, examples)
        try:
            yield all_sessions
        finally:
            all_sessions.close()


def _local(code: str, http: int, grpc: int, metrics: int) -> str:
    ports = {"8000": http, "8001": grpc, "8002": metrics}
    return _DEFAULT_ADDRESS.sub(lambda m: f"{m.group(1)}{ports[m.group(2)]}", code)


def _at(code: str, server: RunningServer) -> str:
    return _local(code, server.http_port, server.grpc_port, server.metrics_port)


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    # `python` and `conveyor` in a bash block are the test environment's.
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    return env


def _run(block: Block, command: list[str], workdir: Path, timeout: float = BLOCK_TIMEOUT) -> str:
    env = _environment()
    try:
        result = subprocess.run(
            command,
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{block.where} did not exit within {timeout} s (a client that never "
            f"closes, or a loop that never ends)\n{exc.stdout!r}\n{exc.stderr!r}"
        )
    report = f"{block.where} exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, report
    return result.stdout


def _check_debian_packages(block: Block, words: list[str]) -> None:
    """``apt-get update`` / ``apt-get install`` change the machine as root: not run. The
    packages an install names must be the ones the test environment has (README's test
    command installs them), so a misspelt package name fails here."""
    if "install" not in words:
        return
    packages = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
    result = subprocess.run(
        ["dpkg-query", "--show", "--showformat", "${Package} ${db:Status-Status}\\n", *packages],
        capture_output=True,
        text=True,
    )
    installed = {line.split()[0] for line in result.stdout.splitlines() if "installed" in line}
    missing = sorted(set(packages) - installed)
    assert not missing, f"{block.where}: Debian packages not installed here: {missing}"


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.where for block in RUNNABLE])
def test_example_runs_as_printed(block: Block, sessions: Sessions) -> None:
    if block.marker == "not-tested":
        pytest.skip(f"{block.where} is marked not-tested: {block.argument}")
    session = sessions.get(block.document)
    if block.marker == "server":
        sessions.serve_python(session, block)
        return
    if block.language == "python":
        _run(block, [sys.executable, "-c", _at(block.code, session.server)], session.workdir)
        return
    for command in commands(block.code):
        words = shlex.split(command)
        arguments = serve_arguments(command)
        if arguments is not None:
            sessions.serve(session, arguments)
        elif words[:2] == ["pip", "install"]:
            assert not install_problems(words[2:]), (block.where, install_problems(words[2:]))
        elif words[:1] == ["apt-get"]:
            _check_debian_packages(block, words)
        else:
            bash = ["bash", "-euo", "pipefail", "-c", _at(command, session.server)]
            stdout = _run(block, bash, session.workdir)
            if words[0] == "curl":
                assert '"error"' not in stdout, f"{block.where}: {command}\n{stdout}"


# --- configuration fragments ------------------------------------------------------------

_BASE_TOML = """\
backend = "python"
max_batch_size = 8

[[inputs]]
name = "INPUT"
datatype = "INT32"
shape = [1]

[[outputs]]
name = "OUTPUT"
datatype = "INT32"
shape = [1]
"""
_BASE_PBTXT = """\
backend: "python"
max_batch_size: 8
input [ { name: "INPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUTPUT", data_type: TYPE_INT32, dims: [ 1 ] } ]
"""


@pytest.mark.parametrize("block", FRAGMENTS, ids=[block.where for block in FRAGMENTS])
def test_fragment_is_read_by_conveyor(block: Block, tmp_path: Path) -> None:
    assert block.argument in ("config.toml", "config.pbtxt"), (
        f"{block.where}: a fragment is of config.toml or config.pbtxt, got {block.argument!r}"
    )
    if block.argument == "config.toml":
        # Its keys and tables take the place of the small model's (a whole config replaces
        # every one of them).
        raw = {**tomllib.loads(_BASE_TOML), **tomllib.loads(block.code)}
        assert parse_config("fragment", raw).name == "fragment", block.where
        return
    whole = re.search(r"^name\s*:", block.code, re.MULTILINE) is not None
    base = "" if whole else _BASE_PBTXT
    name = "fragment"
    if whole:
        found = re.search(r'^name\s*:\s*"([^"]+)"', block.code, re.MULTILINE)
        assert found is not None, block.where
        name = found.group(1)
    folder = tmp_path / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("class Model:\n    pass\n", encoding="utf-8")
    (folder / block.argument).write_text(base + "\n" + block.code, encoding="utf-8")
    source = Repository(tmp_path).source(name)
    assert source.config.name == name, block.where
    backend = re.search(r'^backend\s*:\s*"([^"]+)"', block.code, re.MULTILINE)
    if backend is not None:
        assert source.config.backend == backend.group(1), block.where


# --- signatures -------------------------------------------------------------------------

_PRINTED_CALL = re.compile(r"^(?:\w+\s*=\s*)?([\w.]+)\((.*)\)\s*$", re.DOTALL)


def _resolve(dotted: str, bindings: dict[str, str]) -> Callable[..., Any]:
    first, _, rest = dotted.partition(".")
    path = ".".join(filter(None, (bindings.get(first, first), rest))).split(".")
    for split in range(len(path), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(path[:split]))
        except ModuleNotFoundError:
            continue
        for name in path[split:]:
            found = getattr(found, name)
        assert callable(found), f"{dotted} is not callable"
        return found  # type: ignore[no-any-return]
    raise AssertionError(f"{dotted}: no such module")


def _printed_parameters(text: str) -> list[tuple[str, str, object]]:
    """(name, kind, default) of a signature printed as ``name(a, b=1, *, c=None)``."""
    function = ast.parse(f"def printed({text}): pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args
    positional = arguments.args
    defaults: list[object] = [inspect.Parameter.empty] * (
        len(positional) - len(arguments.defaults)
    ) + [ast.literal_eval(d) for d in arguments.defaults]
    found = [
        (a.arg, "positional", default) for a, default in zip(positional, defaults, strict=True)
    ]
    for argument, default_node in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        default = (
            inspect.Parameter.empty if default_node is None else ast.literal_eval(default_node)
        )
        found.append((argument.arg, "keyword", default))
    return found


def _actual_parameters(function: Callable[..., Any]) -> list[tuple[str, str, object]]:
    found: list[tuple[str, str, object]] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self":
            continue
        kind = "keyword" if parameter.kind is parameter.KEYWORD_ONLY else "positional"
        default = parameter.default
        # An enum default is printed as its value (model_control="none").
        default = getattr(default, "value", default)
        found.append((parameter.name, kind, default))
    return found


@pytest.mark.parametrize("block", SIGNATURES, ids=[block.where for block in SIGNATURES])
def test_printed_signature_is_the_code_s(block: Block) -> None:
    assert block.argument is not None
    bindings = dict(
        pair.split("=", 1) for pair in block.argument.replace(",", " ").split() if "=" in pair
    )
    statements = [s for s in re.split(r"\n(?=\S)", block.code.strip()) if s.strip()]
    assert statements, block.where
    for statement in statements:
        printed = _PRINTED_CALL.match(statement.strip())
        assert printed is not None, f"{block.where}: not a printed call: {statement!r}"
        function = _resolve(printed.group(1), bindings)
        assert _printed_parameters(printed.group(2)) == _actual_parameters(function), (
            f"{block.where}: {printed.group(1)} is printed as ({printed.group(2)}), but its "
            f"signature is {inspect.signature(function)}"
        )


# --- the whole set ----------------------------------------------------------------------


def test_the_documents_have_examples() -> None:
    assert len(DOCUMENTS) > 10, DOCUMENTS
    assert sum(block.language == "python" and block.marker is None for block in RUNNABLE) >= 10
    for block in FILE_BLOCKS:
        assert block.argument is not None and block.argument.startswith("models/"), (
            f"{block.where}: a file block's path starts with models/, got {block.argument!r}"
        )


def test_an_example_that_never_exits_fails(tmp_path: Path) -> None:
    block = Block(ROOT / "README.md", 1, "python", "import time\ntime.sleep(60)\n", None, None)
    with pytest.raises(pytest.fail.Exception, match=r"did not exit within 0\.5 s"):
        _run(block, [sys.executable, "-c", block.code], tmp_path, timeout=0.5)


def test_the_harness_reads_bash_as_a_reader_types_it() -> None:
    assert commands("pip install . && conveyor serve    # two\n# a comment\n") == [
        "pip install .",
        "conveyor serve",
    ]
    assert [" ".join(c.split()) for c in commands("curl -s a \\\n  -d '{\"x\":\n 1}'\n")] == [
        "curl -s a -d '{\"x\": 1}'"
    ]
    assert commands("cp -r \"$(python -c 'print(1)')/tiny\" m/  # note\n") == [
        "cp -r \"$(python -c 'print(1)')/tiny\" m/"
    ]
    assert serve_arguments("taskset -c 0 conveyor serve &") == []
    assert serve_arguments("conveyor serve models/ --workers 4") == ["models/", "--workers", "4"]
    assert serve_arguments("conveyor models models/") is None
    assert install_problems(["'.[ray]'".strip("'"), "tritonclient[all]"]) == []
    assert install_problems(["conveyor[ray]"]), "the PyPI spelling is refused"
    assert install_problems([".[nosuchextra]"]), "an extra pyproject.toml lacks is refused"
