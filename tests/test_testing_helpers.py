"""conveyor.testing: the helpers every server test stands on start servers reliably."""

from __future__ import annotations

import socket
import urllib.request

import pytest

import conveyor.testing as testing
from conveyor.testing import free_port, run_server


def test_free_port_never_repeats_a_port_it_handed_out() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)


@pytest.mark.slow
def test_run_server_starts_again_on_new_ports_when_a_chosen_port_was_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Another process takes the port run_server chose before the server binds it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = int(taken.getsockname()[1])
        offered = iter([taken_port])
        real_free_port = testing.free_port
        monkeypatch.setattr(testing, "free_port", lambda: next(offered, None) or real_free_port())
        with run_server() as server:
            assert taken_port not in (server.http_port, server.grpc_port, server.metrics_port)
            with urllib.request.urlopen(f"{server.http_url}/v2/health/ready", timeout=10) as r:
                assert r.status == 200


@pytest.mark.slow
def test_run_server_keeps_the_ports_the_caller_chose_and_reports_the_failure() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with (
            pytest.raises(testing.ServerFailed, match="already in use"),
            run_server(http_port=port),
        ):
            pass
