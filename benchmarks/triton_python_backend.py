"""Run Triton's Python-backend examples and ``qa/L0_backend_python`` tests, unchanged,
against ``conveyor serve``.

Both live in Triton's repositories, not here; clone them and point this script at them::

    python -m benchmarks.triton_python_backend /path/to/python_backend /path/to/server

Each case is laid out as Triton's QA lays it out (``qa/L0_backend_python/examples/test.sh``
for the examples; each subfolder's ``test.sh`` for the QA tests: which models of
``qa/python_models`` are copied where, which lines are appended to their configs), in a
scratch copy of the sources. Conveyor serves the case's repository and the case's own client
or test file runs unchanged from its folder. Those clients have Triton's ports written in
(``localhost:8000`` / ``8001`` / ``8002``), so the server takes those ports; when they are
busy every case is reported as not run.

Every row says pass, fail or not run. A case not run says why: it needs torch, jax, a GPU
or a C++ backend Conveyor does not have, or it tests Triton's own machinery. A failed case
says what the run showed: the failing tests with their messages (or the client's error)
and the server log's error lines. Results go to
``benchmarks/results/triton_python_backend.{json,md}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python -m benchmarks.x` from a checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    command_line,
    last_lines,
    markdown,
    ports_free,
    write_report,
)
from conveyor.testing import ServerFailed, run_server  # noqa: E402

CASE_TIMEOUT_S = 300.0
# Triton's own switch (qa/common/shm_util.py) that turns off the QA's shared-memory leak
# probe: it reads the Python stub's /dev/shm regions through a C++ module built in Triton's
# CI (triton_shm_monitor); Conveyor runs Python models without a stub and has no such region.
# COLUMNS: pytest's summary lines ("FAILED x - message") are cut to the terminal's width;
# a wide one keeps the message this report quotes.
QA_ENV = {"TEST_JETSON": "1", "COLUMNS": "400"}
TRITON_PORTS = (8000, 8001, 8002)  # HTTP, gRPC, metrics: the clients have them written in

# Why a case fails or is not run, as the table's category column says it.
NEEDS_TORCH = "needs torch"
NEEDS_JAX = "needs jax"
NEEDS_GPU = "needs a GPU"
NEEDS_CPP = "needs a C++ backend"
TRITON_ONLY = "tests Triton's own machinery"
NOT_LAID_OUT = "not laid out by this report"

# --------------------------------------------------------------------------- layout


@dataclasses.dataclass(frozen=True)
class Model:
    """One model folder of a case's repository, as a test.sh builds it.

    ``files``: (source, destination inside the model folder); a source is ``pb:PATH`` (the
    python_backend repository) or ``qa:PATH`` (the server repository's ``qa`` folder).
    ``append``: lines test.sh echoes onto config.pbtxt. ``rename``: test.sh's
    ``sed -i "s/^name:.*/name: \\"NEW\\"/"``.
    """

    name: str
    files: tuple[tuple[str, str], ...]
    append: tuple[str, ...] = ()
    rename: bool = False


def qa_model(source: str, name: str | None = None, *append: str, rename: bool = False) -> Model:
    """A model of qa/python_models copied as test.sh does: model.py into 1/, config beside."""
    folder = f"qa:python_models/{source}"
    return Model(
        name or source,
        ((f"{folder}/model.py", "1/model.py"), (f"{folder}/config.pbtxt", "config.pbtxt")),
        append,
        rename,
    )


def example_model(name: str, model: str, config: str | None) -> Model:
    files = [(f"pb:examples/{model}", "1/model.py")]
    if config is not None:
        files.append((f"pb:examples/{config}", "config.pbtxt"))
    return Model(name, tuple(files))


@dataclasses.dataclass(frozen=True)
class Case:
    """One run: a repository of ``models``, a server, one client command.

    ``folder``: where the command runs (``pb:`` the python_backend checkout for the examples,
    ``qa:L0_backend_python/SUB`` for a QA test, whose ``models`` folder is built there).
    ``requires``: Python modules the case needs; ``skip``: (category, why) for a case not
    run at all. A failure's reason is never written here: it is what the run showed.
    """

    name: str
    folder: str
    models: tuple[Model, ...]
    command: tuple[str, ...]
    server_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    requires: tuple[str, ...] = ()
    skip: tuple[str, str] | None = None
    fresh: bool = False  # test.sh empties models/ first
    log: str = "server.log"  # test.sh's SERVER_LOG, which some tests read


DECOUPLED = "model_transaction_policy { decoupled: True }"


def _examples() -> list[Case]:
    """examples/test.sh: one growing repository; a server per example over all so far."""
    steps: list[tuple[str, tuple[Model, ...], tuple[str, ...], dict[str, object]]] = [
        (
            "add_sub",
            (example_model("add_sub", "add_sub/model.py", "add_sub/config.pbtxt"),),
            ("examples/add_sub/client.py",),
            {},
        ),
        (
            "pytorch",
            (example_model("pytorch", "pytorch/model.py", "pytorch/config.pbtxt"),),
            ("examples/pytorch/client.py",),
            {"requires": ("torch",)},
        ),
        (
            "jax",
            (example_model("jax", "jax/model.py", "jax/config.pbtxt"),),
            ("examples/jax/client.py",),
            {"requires": ("jax",)},
        ),
        (
            "bls sync",
            (example_model("bls_sync", "bls/sync_model.py", "bls/sync_config.pbtxt"),),
            ("examples/bls/sync_client.py",),
            {"requires": ("torch",)},
        ),
        (
            "decoupled repeat",
            (
                example_model(
                    "repeat_int32", "decoupled/repeat_model.py", "decoupled/repeat_config.pbtxt"
                ),
            ),
            ("examples/decoupled/repeat_client.py",),
            {},
        ),
        (
            "decoupled square",
            (
                example_model(
                    "square_int32", "decoupled/square_model.py", "decoupled/square_config.pbtxt"
                ),
            ),
            ("examples/decoupled/square_client.py",),
            {},
        ),
        (
            "bls async",
            (example_model("bls_async", "bls/async_model.py", "bls/async_config.pbtxt"),),
            ("examples/bls/async_client.py",),
            {"requires": ("torch",)},
        ),
        (
            "auto_complete",
            (
                example_model("nobatch_auto_complete", "auto_complete/nobatch_model.py", None),
                example_model("batch_auto_complete", "auto_complete/batch_model.py", None),
            ),
            ("examples/auto_complete/client.py",),
            {},
        ),
        (
            "bls_decoupled sync",
            (
                example_model(
                    "bls_decoupled_sync",
                    "bls_decoupled/sync_model.py",
                    "bls_decoupled/sync_config.pbtxt",
                ),
            ),
            ("examples/bls_decoupled/sync_client.py",),
            {},
        ),
        (
            "bls_decoupled async",
            (
                example_model(
                    "bls_decoupled_async",
                    "bls_decoupled/async_model.py",
                    "bls_decoupled/async_config.pbtxt",
                ),
            ),
            ("examples/bls_decoupled/async_client.py",),
            {},
        ),
        (
            "instance_kind (resnet50)",
            (
                Model(
                    "resnet50",
                    (
                        ("pb:examples/instance_kind/model.py", "1/model.py"),
                        ("pb:examples/instance_kind/config.pbtxt", "config.pbtxt"),
                    ),
                ),
            ),
            (
                "examples/instance_kind/client.py",
                "--label_file",
                "examples/instance_kind/resnet50_labels.txt",
            ),
            {
                "skip": (
                    NEEDS_GPU,
                    "torch.hub ResNet50 on KIND_GPU and KIND_CPU instances, "
                    "downloaded from the internet (the client compares both kinds)",
                )
            },
        ),
        (
            "custom_metrics",
            (
                example_model(
                    "custom_metrics", "custom_metrics/model.py", "custom_metrics/config.pbtxt"
                ),
            ),
            ("examples/custom_metrics/client.py",),
            {},
        ),
        (
            "preprocessing",
            (),
            ("examples/preprocessing/client.py",),
            {
                "skip": (
                    NEEDS_CPP,
                    "an ONNX-exported ResNet served by Triton's TensorRT backend "
                    "behind a torchvision (torch) preprocessing model",
                )
            },
        ),
    ]
    cases = []
    so_far: tuple[Model, ...] = ()
    for name, models, command, extra in steps:
        so_far = so_far + models
        cases.append(
            Case(
                f"examples/{name}",
                "pb:",
                so_far,
                (sys.executable, *command),
                requires=tuple(extra.get("requires", ())),  # type: ignore[arg-type]
                skip=extra.get("skip"),  # type: ignore[arg-type]
            )
        )
    return cases


def _pytest(*target: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *target)


QA = "qa:L0_backend_python"
BATCHING = "dynamic_batching { max_queue_delay_microseconds: 500000 }"


def _response_sender_models() -> tuple[Model, ...]:
    folder = "qa:python_models/response_sender"
    models = []
    for suffix, source, append in [
        ("", "model.py", ()),
        ("_decoupled", "model.py", (DECOUPLED,)),
        ("_async", "model_async.py", ()),
        ("_decoupled_async", "model_async.py", (DECOUPLED,)),
        ("_batching", "model.py", (BATCHING,)),
        ("_decoupled_batching", "model.py", (DECOUPLED, BATCHING)),
        ("_async_batching", "model_async.py", (BATCHING,)),
        ("_decoupled_async_batching", "model_async.py", (DECOUPLED, BATCHING)),
    ]:
        files = (
            (f"{folder}/model_common.py", "1/model_common.py"),
            (f"{folder}/{source}", "1/model.py"),
            (f"{folder}/config.pbtxt", "config.pbtxt"),
        )
        models.append(Model(f"response_sender{suffix}", files, append))
    return tuple(models)


def _qa() -> list[Case]:
    square = example_model(
        "square_int32", "decoupled/square_model.py", "decoupled/square_config.pbtxt"
    )
    return [
        Case(
            "qa/response_sender",
            f"{QA}/response_sender",
            _response_sender_models(),
            _pytest("response_sender_test.py"),
            fresh=True,
        ),
        Case(
            "qa/response_sender complete_final",
            f"{QA}/response_sender",
            (qa_model("response_sender_complete_final"),),
            _pytest("response_sender_complete_final_test.py"),
            fresh=True,
        ),
        Case(
            "qa/parameters",
            f"{QA}/parameters",
            (
                qa_model("response_parameters"),
                qa_model("response_parameters_decoupled"),
                qa_model("response_parameters_bls"),
            ),
            _pytest("response_parameters_test.py"),
            fresh=True,
        ),
        Case(
            "qa/async_execute",
            f"{QA}/async_execute",
            (qa_model("async_execute_decouple"), qa_model("async_execute_decouple_bls")),
            _pytest("concurrency_test.py"),
            fresh=True,
            log="concurrency_test.server.log",
        ),
        Case(
            "qa/decoupled",
            f"{QA}/decoupled",
            (
                qa_model("identity_fp32"),
                qa_model("execute_cancel", None, DECOUPLED),
                qa_model("response_sender_until_cancelled"),
                square,
                qa_model("dlpack_add_sub"),
            ),
            _pytest("decoupled_test.py"),
            log="decoupled_server.log",
        ),
        Case(
            "qa/ensemble",
            f"{QA}/ensemble",
            (
                Model("ensemble", (("qa:python_models/ensemble/config.pbtxt", "config.pbtxt"),)),
                Model(
                    "add_sub_1",
                    (
                        ("qa:python_models/add_sub/model.py", "1/model.py"),
                        ("qa:python_models/add_sub/config.pbtxt", "config.pbtxt"),
                    ),
                ),
                Model(
                    "add_sub_2",
                    (
                        ("qa:python_models/add_sub/model.py", "1/model.py"),
                        ("qa:python_models/add_sub/config.pbtxt", "config.pbtxt"),
                    ),
                ),
            ),
            _pytest("ensemble_test.py", "-k", "not gpu"),
            fresh=True,
        ),
        Case(
            "qa/ensemble (GPU)",
            f"{QA}/ensemble",
            (),
            (),
            skip=(
                NEEDS_GPU,
                "ensemble_gpu chains a libtorch model on KIND_GPU (Triton's "
                "PyTorch C++ backend) with Python models",
            ),
        ),
        Case(
            "qa/custom_metrics",
            f"{QA}/custom_metrics",
            (qa_model("custom_metrics"),),
            _pytest("../test_infer_shm_leak.py"),
            env=(("MODEL_NAME", "custom_metrics"),),
        ),
        # Its models folder is part of the QA tree: no models laid out, that one is served.
        Case(
            "qa/argument_validation",
            f"{QA}/argument_validation",
            (),
            _pytest("../test_infer_shm_leak.py"),
            env=(("MODEL_NAME", "argument_validation"),),
        ),
        Case(
            "qa/request_rescheduling",
            f"{QA}/request_rescheduling",
            (
                qa_model("bls_request_rescheduling"),
                qa_model("request_rescheduling_addsub"),
                qa_model("iterative_sequence"),
                qa_model("wrong_return_type"),
            ),
            _pytest("../test_infer_shm_leak.py"),
            ("--model-control", "explicit", "--load-model", "*"),
            env=(("MODEL_NAME", "bls_request_rescheduling"),),
        ),
        Case(
            "qa/request_rescheduling grpc",
            f"{QA}/request_rescheduling",
            (
                qa_model("bls_request_rescheduling"),
                qa_model("request_rescheduling_addsub"),
                qa_model("iterative_sequence"),
                qa_model("wrong_return_type"),
            ),
            _pytest("grpc_endpoint_test.py"),
            ("--model-control", "explicit", "--load-model", "*"),
        ),
        Case(
            "qa/model_control",
            f"{QA}/model_control",
            (
                qa_model("identity_fp32"),
                Model(
                    "simple_identity_fp32",
                    (("qa:python_models/simple_identity_fp32/config.pbtxt", "config.pbtxt"),),
                ),
            ),
            _pytest("model_control_test.py"),
            ("--model-control", "explicit"),
        ),
        *[
            Case(f"qa/{name}", f"{QA}/{name}", (), (), skip=skip)
            for name, skip in [
                (
                    "bls",
                    (
                        NEEDS_TORCH,
                        "its BLS models exchange tensors with libtorch and "
                        "ONNX models on GPU via DLPack (torch)",
                    ),
                ),
                (
                    "io",
                    (
                        NEEDS_TORCH,
                        "dlpack_io_identity* models move tensors with "
                        "torch.utils.dlpack, GPU variants included",
                    ),
                ),
                (
                    "env",
                    (
                        TRITON_ONLY,
                        "conda-pack execution environments "
                        "(EXECUTION_ENV_PATH) and S3 repositories",
                    ),
                ),
                (
                    "lifecycle",
                    (
                        NOT_LAID_OUT,
                        "several servers with sed-edited configs and "
                        "stub-process timeouts (--backend-config python,...)",
                    ),
                ),
                ("logging", (TRITON_ONLY, "compares Triton's --log-verbose output lines")),
                (
                    "model_readiness",
                    (
                        TRITON_ONLY,
                        "kills the Python stub process with "
                        "signals and reads Triton's readiness after it",
                    ),
                ),
                (
                    "python_based_backends",
                    (
                        TRITON_ONLY,
                        "Python-based backends installed in --backend-directory (e.g. vLLM style)",
                    ),
                ),
                ("restart", (TRITON_ONLY, "kills and restarts the stub process")),
                ("variants", (TRITON_ONLY, "rebuilds the backend stub for other Python versions")),
                ("examples", (NOT_LAID_OUT, "the same examples as the examples/* rows above")),
                (
                    "python_test.py (L0_backend_python/test.sh)",
                    (
                        NOT_LAID_OUT,
                        "the top-level test's many models include torch and GPU "
                        "ones and shared-memory probes of the stub",
                    ),
                ),
            ]
        ],
    ]


def cases() -> list[Case]:
    return [*_examples(), *_qa()]


def source_path(spec: str, python_backend: Path, qa: Path) -> Path:
    """``pb:PATH`` / ``qa:PATH`` -> a path under the python_backend checkout / server qa."""
    kind, _, rest = spec.partition(":")
    if kind == "pb":
        return python_backend / rest if rest else python_backend
    if kind == "qa":
        return qa / rest
    raise ValueError(f"source {spec!r}: expected 'pb:PATH' or 'qa:PATH'")


def lay_out(
    models: Sequence[Model], repository: Path, python_backend: Path, qa: Path, fresh: bool
) -> None:
    """Build ``repository`` as test.sh does: into the models a QA folder has of its own
    (some have), or, ``fresh``, into an empty one (test.sh's ``rm -rf models``). A missing
    source is a FileNotFoundError."""
    if fresh and repository.exists():
        shutil.rmtree(repository)
    repository.mkdir(parents=True, exist_ok=True)
    for model in models:
        folder = repository / model.name
        (folder / "1").mkdir(parents=True, exist_ok=True)
        for source, destination in model.files:
            target = folder / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_path(source, python_backend, qa), target)
        config = folder / "config.pbtxt"
        if config.exists() and (model.rename or model.append):
            text = config.read_text()
            if model.rename:
                text = re.sub(r"(?m)^name:.*$", f'name: "{model.name}"', text)
            for line in model.append:
                text = text.rstrip("\n") + "\n" + line + "\n"
            config.write_text(text)


# --------------------------------------------------------------------------- running


@dataclasses.dataclass
class Outcome:
    case: str
    result: str  # pass | fail | not run
    category: str  # why not pass: one of the constants above, "" when it passed
    why: str
    seconds: float = 0.0
    output: str = ""  # the client's last lines when it failed, to check ``why`` against
    server_errors: str = ""  # the server log's first ERROR lines when it failed


def precheck(case: Case) -> Outcome | None:
    """The outcome of a case that is not run (skipped, or a module it needs is missing)."""
    if case.skip is not None:
        return Outcome(case.name, "not run", *case.skip)
    for module in case.requires:
        if importlib.util.find_spec(module) is None:
            category = {"torch": NEEDS_TORCH, "jax": NEEDS_JAX}.get(module, f"needs {module}")
            return Outcome(case.name, "not run", category, f"{module} is not installed here")
    return None


# What a failing run says about why: pytest's summary lines, unittest's FAIL/ERROR heads,
# an exception's last line, a client's printed error.
_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?)(?: - (.*))?$")
_EXCEPTION = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit)\b:?\s*(.*)$")
# A log line's head, ``[TIME ]ERROR logger: `` (conveyor/server/log_output.py's formats).
_SERVER_LOG_HEAD = re.compile(r"^(\S+ )?ERROR \S+: ")


def observed_reason(output: str, server_errors: str = "", limit: int = 700) -> str:
    """Why a run failed, from what it printed: each failing test with its message (pytest's
    ``FAILED x::y - message``), else the exceptions raised, else its last lines; then the
    server log's error lines. No reason is written down beforehand: this is what was seen."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    found: list[str] = []
    for line in lines:
        match = _PYTEST_SUMMARY.match(line)
        if match is not None:
            test = match.group(2).rsplit("::", 1)[-1]
            found.append(f"{test}: {match.group(3) or match.group(1)}")
    if not found:
        for line in lines:
            match = _EXCEPTION.match(line)
            if match is not None and not line.startswith("Traceback"):
                found.append(line)
    reason = "; ".join(dict.fromkeys(found)) if found else last_lines(output)
    if server_errors:
        reason += " — server: " + server_errors
    return reason[:limit]


def server_error_lines(log: Path, count: int = 3) -> str:
    """The server log's first distinct ERROR lines, without their timestamps."""
    if not log.exists():
        return ""
    errors = [
        _SERVER_LOG_HEAD.sub("", line).strip()
        for line in log.read_text(errors="replace").splitlines()
        if _SERVER_LOG_HEAD.match(line)
    ]
    return " | ".join(list(dict.fromkeys(errors))[:count])[:400]


def classify(
    case: Case, passed: bool, output: str, seconds: float, server_errors: str = ""
) -> Outcome:
    if passed:
        return Outcome(case.name, "pass", "", "", seconds)
    why = observed_reason(output, server_errors)
    return Outcome(case.name, "fail", "", why, seconds, last_lines(output), server_errors)


def run_case(case: Case, python_backend: Path, qa: Path) -> Outcome:
    skipped = precheck(case)
    if skipped is not None:
        return skipped
    folder = source_path(case.folder, python_backend, qa)
    repository = folder / "models"
    lay_out(case.models, repository, python_backend, qa, case.fresh)
    log = folder / case.log
    log.unlink(missing_ok=True)  # two cases of one QA folder each get their own log
    start = time.monotonic()
    # Not strict: a model that cannot load here (torch missing) fails its own requests
    # rather than keep the server from answering ready, as Triton's --exit-on-error=false.
    args = [*case.server_args, "--no-strict-readiness", "--log-file", str(log)]
    env = {**os.environ, **QA_ENV, **dict(case.env), "SERVER_LOG": str(log)}
    try:
        http, grpc, metrics = TRITON_PORTS
        with run_server(
            repository,
            http_port=http,
            grpc_port=grpc,
            metrics_port=metrics,
            extra_args=args,
            ready_timeout=120.0,
        ):
            try:
                done = subprocess.run(
                    case.command,
                    cwd=folder,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=CASE_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired as exc:
                text = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else ""
                return classify(case, False, text + "\ntimed out", time.monotonic() - start)
    except ServerFailed as exc:
        return classify(case, False, f"server did not start: {exc}", time.monotonic() - start)
    text = done.stdout + done.stderr
    passed = done.returncode == 0 and "Traceback" not in text
    errors = "" if passed else server_error_lines(log)
    return classify(case, passed, text, time.monotonic() - start, errors)


def scratch_copy(python_backend: Path, server: Path, into: Path) -> tuple[Path, Path]:
    """Copies of the sources the cases write into (models folders, logs): the checkouts
    stay untouched. Returns (python_backend, qa)."""
    pb = into / "python_backend"
    shutil.copytree(python_backend / "examples", pb / "examples")
    qa = into / "qa"
    for part in ("common", "python_models", "L0_backend_python"):
        shutil.copytree(server / "qa" / part, qa / part, symlinks=True)
    # The QA's bls and decoupled tests copy python_backend/examples from a clone there.
    for sub in ("bls", "decoupled"):
        (qa / "L0_backend_python" / sub / "python_backend").symlink_to(pb)
    return pb, qa


def run_all(python_backend: Path, server: Path, names: Sequence[str] | None) -> list[Outcome]:
    chosen = [c for c in cases() if not names or any(n in c.name for n in names)]
    outcomes: list[Outcome] = []
    free = ports_free(*TRITON_PORTS)
    with tempfile.TemporaryDirectory(prefix="triton-python-backend-") as scratch:
        pb, qa = scratch_copy(python_backend, server, Path(scratch))
        for case in chosen:
            if not free and precheck(case) is None:
                outcome = Outcome(
                    case.name,
                    "not run",
                    "ports busy",
                    "Triton's ports 8000-8002 (written into the clients) are in use",
                )
            else:
                outcome = run_case(case, pb, qa)
            outcomes.append(outcome)
            print(_row(outcome), flush=True)
    return outcomes


def _row(outcome: Outcome) -> str:
    return (
        f"{outcome.result:7}  {outcome.seconds:5.1f}s  {outcome.case:40}  "
        f"{outcome.category}{': ' if outcome.category else ''}{outcome.why}"
    )


def table(outcomes: Sequence[Outcome]) -> str:
    rows = [("case", "result", "why not pass")]
    for outcome in outcomes:
        why = f"{outcome.category}: {outcome.why}" if outcome.category else outcome.why
        rows.append((outcome.case, outcome.result, why.replace("|", "\\|")))
    return markdown(rows, align_left=3)


def git_commit(path: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown (not a git checkout)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python_backend", type=Path, help="a python_backend checkout")
    parser.add_argument("server", type=Path, help="a server checkout (its qa/ is used)")
    parser.add_argument("--only", nargs="*", help="run the cases whose names contain these")
    parser.add_argument("--out", default=str(RESULTS), help="where the results are written")
    options = parser.parse_args(argv)
    outcomes = run_all(options.python_backend, options.server, options.only)
    passed = sum(o.result == "pass" for o in outcomes)
    measured = (
        f"`{command_line('benchmarks.triton_python_backend', argv)}`: python_backend "
        f"{git_commit(options.python_backend)}, server {git_commit(options.server)}; "
        f"{passed} of {len(outcomes)} cases pass."
    )
    text = write_report(
        options.out,
        "triton_python_backend",
        measured,
        table(outcomes),
        [dataclasses.asdict(o) for o in outcomes],
    )
    print("\n" + text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
