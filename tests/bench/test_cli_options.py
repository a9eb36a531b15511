"""``conveyor bench`` options come from the fields of its dataclasses (conveyor.options)."""

import dataclasses

import pytest

from conveyor.bench.cli import OPTION_SOURCES, Output, run_parser
from conveyor.bench.loadgen import Point
from conveyor.bench.runner import BenchSpec
from conveyor.bench.sweep import Sweep
from conveyor.bench.targets.base import TargetSpec
from conveyor.options import from_arguments


def _parse(*argv: str):
    args = run_parser().parse_args(argv)
    target = from_arguments(args, TargetSpec)
    return (
        target,
        from_arguments(args, Sweep),
        from_arguments(args, BenchSpec, target=target),
        from_arguments(args, Output),
    )


def test_every_field_with_help_is_an_option_and_nothing_else_is():
    help_text = run_parser().format_help()
    for source, _title in OPTION_SOURCES:
        for field in dataclasses.fields(source):
            flags = field.metadata.get("flags") or ["--" + field.name.replace("_", "-")]
            if field.metadata.get("positional"):
                continue
            for flag in flags:
                assert (flag in help_text) == ("help" in field.metadata), (source, field.name)


def test_options_become_the_dataclasses():
    target, sweep, bench, output = _parse(
        "mlp",
        "--url",
        "grpc://h:9",
        "--streaming",
        "-r",
        "100,500",
        "--spin",
        "0.001",
        "-d",
        "2",
        "--shape",
        "INPUT0:4,8",
        "--shape",
        "INPUT1:3",
        "-b",
        "2",
        "-p",
        "3",
        "--json",
        "r.json",
        "-q",
    )
    assert target == TargetSpec("grpc://h:9", "mlp", streaming=True)
    assert sweep.request_rate == (100.0, 500.0) and sweep.duration_s == 2.0
    assert bench.shapes == {"INPUT0": (4, 8), "INPUT1": (3,)}
    assert (bench.batch_size, bench.processes) == (2, 3)
    assert output == Output(json_path="r.json", quiet=True)
    points = sweep.points(seed=7)
    assert [p.rate for p in points] == [100.0, 500.0]
    assert all(p.spin_s == 0.001 and p.seed == 7 and p.duration_s == 2.0 for p in points)


def test_defaults_are_the_dataclasses_defaults():
    target, sweep, bench, output = _parse("tiny")
    assert target == TargetSpec("http://127.0.0.1:8000", "tiny")
    assert sweep == Sweep() and sweep.points() == [Point(concurrency=1)]
    assert bench == BenchSpec(target) and output == Output()


def test_closed_and_open_loop_exclude_each_other():
    with pytest.raises(ValueError, match="not both"):
        _parse("tiny", "-c", "1", "-r", "10")
