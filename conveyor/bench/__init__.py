"""``conveyor bench``: a load generator and report for any KServe V2 server, or the engine.

from conveyor.bench import BenchSpec, Point, TargetSpec, run_bench
report = run_bench(BenchSpec(TargetSpec("grpc://127.0.0.1:8001", "mlp")),
                   [Point(concurrency=c) for c in (1, 4, 16)])
"""

from conveyor.bench.inputs import ModelSpec
from conveyor.bench.loadgen import Point
from conveyor.bench.report import Report, format_table, read_json, write_json
from conveyor.bench.runner import BenchSpec, run_bench
from conveyor.bench.targets.base import TargetSpec

__all__ = [
    "BenchSpec",
    "ModelSpec",
    "Point",
    "Report",
    "TargetSpec",
    "format_table",
    "read_json",
    "run_bench",
    "write_json",
]
