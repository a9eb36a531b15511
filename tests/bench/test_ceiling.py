"""Every wire transport, against the canned servers of ``conveyor bench ceiling``."""

from conveyor.bench.ceiling import format_ceiling, measure


def test_canned_http_grpc_and_stream_servers_answer_the_generator():
    reports = measure(duration_s=0.3, concurrency=(2,), processes=(1,), progress=False)
    assert [r.label for r in reports] == ["canned http-binary x1 proc", "canned grpc x1 proc",
                                          "canned grpc-stream x1 proc", "inprocess"]
    for report in reports:
        (point,) = report.points
        assert point.errors == 0, point.error_samples
        assert point.requests > 10 and point.generator_cpu > 0
    assert reports[0].points[0].server is None  # the canned server keeps no statistics
    assert "infer/s per gen core" in format_ceiling(reports)
