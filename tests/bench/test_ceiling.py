"""Worker processes and both wire transports, against the canned servers of ``ceiling``."""

from conveyor.bench.ceiling import format_ceiling, measure


def test_two_worker_processes_drive_canned_http_and_grpc_servers():
    reports = measure(duration_s=0.3, concurrency=(4,), processes=(2,), progress=False)
    assert [r.label for r in reports] == ["canned http-binary x2 proc", "canned grpc x2 proc",
                                          "canned grpc-stream x2 proc", "inprocess"]
    for report in reports:
        (point,) = report.points
        assert point.errors == 0, point.error_samples
        assert point.requests > 100 and point.generator_cpu > 0
    assert [p.processes for r in reports for p in r.points] == [2, 2, 2, 1]
    assert reports[0].points[0].server is None  # the canned server keeps no statistics
    assert "infer/s per gen core" in format_ceiling(reports)
