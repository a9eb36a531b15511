"""The shipped OpenAPI description of the V2 routes, served at /v2/openapi.json, and
schemathesis driving the real server from it (bounded: a few examples per operation).

The checks: no 5xx for any generated request; every status, content type and response
body one the description allows. Not checked: schemathesis's opinions beyond the V2
protocol (e.g. 405 for an undeclared method: Conveyor answers 404, as Triton does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from rel_util import build_repository
from schemathesis import checks

from conveyor.testing import RunningServer, run_server


@pytest.fixture(scope="module")
def openapi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    repository = build_repository(tmp_path_factory.mktemp("openapi"))
    with run_server(repository) as server:
        yield server
        assert server.process.poll() is None, server.output()


def test_the_description_is_shipped_and_served(openapi_server: RunningServer) -> None:
    import urllib.request

    shipped = Path(__file__).resolve().parents[2] / "conveyor/server/http/openapi.json"
    with urllib.request.urlopen(openapi_server.http_url + "/v2/openapi.json") as response:
        served = json.loads(response.read())
    assert served == json.loads(shipped.read_text())
    assert served["openapi"].startswith("3.")
    assert "/v2/models/{model}/infer" in served["paths"]


@pytest.fixture(scope="module")
def api_schema(openapi_server: RunningServer):  # type: ignore[no-untyped-def]
    return schemathesis.openapi.from_url(openapi_server.http_url + "/v2/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_schemathesis_finds_no_server_error(case) -> None:  # type: ignore[no-untyped-def]
    case.call_and_validate(
        timeout=10,
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )
