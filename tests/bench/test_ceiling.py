"""Every wire transport, against the canned servers of ``conveyor bench ceiling``."""

import pytest

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part


@pytest.mark.slow
def test_canned_http_grpc_and_stream_servers_answer_the_generator(bench_cli):
    done = bench_cli("ceiling", "-d", "0.3", "-c", "2", "-p", "1", "-q")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "infer/s per gen core" in lines[0]
    rows = {line.split("  ")[0].strip(): line.split() for line in lines[2:]}
    assert set(rows) == {
        "canned http-binary x1 proc",
        "canned grpc x1 proc",
        "canned grpc-stream x1 proc",
        "inprocess",
    }
    for cells in rows.values():
        infer_per_s, errors = cells[-6], cells[-3]
        assert errors == "0"
        assert float(infer_per_s.replace(",", "")) > 10
