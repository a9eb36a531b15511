"""benchmarks/triton_python_backend.py lays cases out as Triton's test.sh files do and says
why a case did not pass, checked on a small fake python_backend / server tree (no Triton
sources, no server)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from benchmarks import triton_python_backend as report


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    """(python_backend, qa): the files the cases below copy, each naming itself."""
    pb = tmp_path / "pb"
    qa = tmp_path / "qa"
    files = {
        pb / "examples/add_sub/model.py": "add_sub model",
        pb / "examples/add_sub/config.pbtxt": 'name: "add_sub"\nbackend: "python"\n',
        pb / "examples/decoupled/square_model.py": "square model",
        pb / "examples/decoupled/square_config.pbtxt": 'name: "square_int32"\n',
        qa / "python_models/response_sender/model_common.py": "common",
        qa / "python_models/response_sender/model.py": "sync",
        qa / "python_models/response_sender/model_async.py": "async",
        qa / "python_models/response_sender/config.pbtxt": 'backend: "python"\n',
        qa / "python_models/execute_cancel/model.py": "cancel",
        qa / "python_models/execute_cancel/config.pbtxt": 'name: "execute_cancel"\n',
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pb, qa


def _case(name: str) -> report.Case:
    (case,) = [c for c in report.cases() if c.name == name]
    return case


def test_response_sender_is_laid_out_as_its_test_sh_does(sources: tuple[Path, Path]):
    pb, qa = sources
    repository = qa / "L0_backend_python/response_sender/models"
    report.lay_out(_case("qa/response_sender").models, repository, pb, qa, fresh=True)
    assert sorted(p.name for p in repository.iterdir()) == [
        "response_sender",
        "response_sender_async",
        "response_sender_async_batching",
        "response_sender_batching",
        "response_sender_decoupled",
        "response_sender_decoupled_async",
        "response_sender_decoupled_async_batching",
        "response_sender_decoupled_batching",
    ]
    folder = repository / "response_sender_decoupled_async_batching"
    assert (folder / "1/model.py").read_text() == "async"  # model_async.py as model.py
    assert (folder / "1/model_common.py").read_text() == "common"
    config = (folder / "config.pbtxt").read_text().splitlines()
    assert config == [
        'backend: "python"',
        "model_transaction_policy { decoupled: True }",
        "dynamic_batching { max_queue_delay_microseconds: 500000 }",
    ]
    # The plain one is the config unchanged.
    assert (repository / "response_sender/config.pbtxt").read_text() == 'backend: "python"\n'


def test_models_a_qa_folder_has_are_kept_unless_test_sh_empties_it(
    sources: tuple[Path, Path],
):
    pb, qa = sources
    repository = qa / "L0_backend_python/decoupled/models"
    (repository / "decoupled_bls/1").mkdir(parents=True)  # shipped in the QA folder
    report.lay_out(_case("qa/decoupled").models[1:2], repository, pb, qa, fresh=False)
    assert sorted(p.name for p in repository.iterdir()) == ["decoupled_bls", "execute_cancel"]
    assert (
        (repository / "execute_cancel/config.pbtxt")
        .read_text()
        .endswith("model_transaction_policy { decoupled: True }\n")
    )
    report.lay_out(_case("qa/decoupled").models[1:2], repository, pb, qa, fresh=True)
    assert sorted(p.name for p in repository.iterdir()) == ["execute_cancel"]


def test_examples_grow_one_repository_as_examples_test_sh_does():
    names = [[m.name for m in c.models] for c in report.cases() if c.name.startswith("examples/")]
    assert names[0] == ["add_sub"]
    # Every example's server has every model of the examples before it.
    for before, after in itertools.pairwise(names):
        assert after[: len(before)] == before
    square = _case("examples/decoupled square")
    assert square.models[-1].files == (
        ("pb:examples/decoupled/square_model.py", "1/model.py"),
        ("pb:examples/decoupled/square_config.pbtxt", "config.pbtxt"),
    )
    assert square.command == (sys.executable, "examples/decoupled/square_client.py")


def test_a_missing_source_file_is_an_error_that_names_it(sources: tuple[Path, Path]):
    pb, qa = sources
    with pytest.raises(FileNotFoundError, match=r"pytorch/model\.py"):
        report.lay_out(_case("examples/pytorch").models, pb / "models", pb, qa, fresh=True)


def test_a_case_needing_a_missing_module_is_not_run_and_says_which():
    case = report.Case("x", "pb:", (), ("true",), requires=("no_such_module_here",))
    outcome = report.precheck(case)
    assert outcome is not None
    assert (outcome.result, outcome.category) == ("not run", "needs no_such_module_here")
    torch = report.Case("t", "pb:", (), ("true",), requires=("torch",))
    if report.importlib.util.find_spec("torch") is None:
        assert report.precheck(torch) == report.Outcome(
            "t", "not run", report.NEEDS_TORCH, "torch is not installed here"
        )
    skipped = _case("qa/ensemble (GPU)")
    outcome = report.precheck(skipped)
    assert outcome is not None and outcome.category == report.NEEDS_GPU


def test_a_failure_says_what_the_run_showed_not_a_reason_written_beforehand(tmp_path: Path):
    pytest_output = (
        "F.\n=== short test summary info ===\n"
        "FAILED response_parameters_test.py::ResponseParametersTest::test_setting_empty - "
        "AssertionError: 'x' != 'y'\n1 failed, 1 passed in 0.5s\n"
    )
    log = tmp_path / "server.log"
    log.write_text(
        "2026-12-04T23:30:01.123Z INFO conveyor.engine: loaded\n"
        "2026-12-04T23:30:02.456Z ERROR conveyor.engine: model 'm': output 'OUT' is INT64\n"
        "ERROR conveyor.engine: model 'm': output 'OUT' is INT64\n"
    )
    errors = report.server_error_lines(log)
    assert errors == "model 'm': output 'OUT' is INT64"  # timestamp gone, once
    outcome = report.classify(_case("qa/parameters"), False, pytest_output, 1.0, errors)
    assert (outcome.result, outcome.category) == ("fail", "")
    assert outcome.why == ("test_setting_empty: AssertionError: 'x' != 'y' — server: " + errors)
    # A client script's exception, not pytest: its last line says it.
    script = "Traceback (most recent call last):\n  File x\ntritonclient.utils."
    script += "InferenceServerException: [400] unexpected datatype INT64\n"
    why = report.classify(_case("examples/bls_decoupled sync"), False, script, 1.0).why
    assert why == "tritonclient.utils.InferenceServerException: [400] unexpected datatype INT64"
    unknown = report.Case("new", "pb:", (), ("true",))
    outcome = report.classify(unknown, False, "line one\n\nwrong answer 2 != 1\n", 1.0)
    assert (outcome.category, outcome.why) == ("", "line one | wrong answer 2 != 1")
    assert report.classify(unknown, True, "", 1.0).result == "pass"


def test_the_table_has_a_row_per_case_with_its_reason():
    outcomes = [
        report.Outcome("examples/add_sub", "pass", "", ""),
        report.Outcome("qa/x", "fail", report.NEEDS_GPU, "a | b"),
    ]
    lines = report.table(outcomes).splitlines()
    assert lines[0] == "| case | result | why not pass |"
    assert lines[2] == "| examples/add_sub | pass |  |"
    assert lines[3] == "| qa/x | fail | needs a GPU: a \\| b |"


def test_a_case_logs_where_its_test_sh_does():
    # decoupled_test.py reads "decoupled_server.log", its test.sh's SERVER_LOG.
    assert _case("qa/decoupled").log == "decoupled_server.log"
    assert _case("qa/parameters").log == "server.log"
