"""The embeddable ASGI app streams generate_stream events under a real ASGI server.

The app (``conveyor/server/http/asgi.py``) runs in stock uvicorn on a loopback port (a
thread of this process, over a real engine), and aiohttp reads the Server-Sent Events off
the socket. The model ``paced`` yields one response, then waits for the test to say it saw
that event (a file ``seen-<i>`` beside the model) before the next: if the app or the host
server held events back, the model would wait in vain and the test would time out.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conveyor import __version__
from conveyor.engine import Engine
from conveyor.server.dataplane import DataPlane
from conveyor.server.http.asgi import ASGIApp
from conveyor.server.http.routes import V2Routes
from conveyor.testing import free_port
from tests.models import RepoBuilder
from tests.polling import wait_until

uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is in the test extra")

PACED = """
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


class Model:
    def infer(self, inputs):
        count = int(inputs["COUNT"][0])
        for index in range(count):
            if index == int(inputs.get("FAIL_AT", np.array([-1]))[0]):
                raise ValueError(f"failed before response {index}")
            yield {"TEXT": np.array([f"token-{index}".encode()], dtype=object)}
            waited = time.monotonic() + 10  # bounded: a test that stops reading fails, not hangs
            while not (HERE / f"seen-{index}").exists() and time.monotonic() < waited:
                time.sleep(0.005)
"""

PACED_CONFIG = """
backend = "python"
decoupled = true

[[inputs]]
name = "COUNT"
datatype = "INT32"
shape = [1]

[[inputs]]
name = "FAIL_AT"
datatype = "INT32"
shape = [1]
optional = true

[[outputs]]
name = "TEXT"
datatype = "BYTES"
shape = [1]
"""


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("asgi-stream")
    builder = RepoBuilder(root)
    builder.python("paced", PACED, PACED_CONFIG)
    builder.python("endless", ENDLESS, PACED_CONFIG)
    return root / "paced" / "1"


@pytest.fixture(scope="module")
def base_url(model_folder: Path) -> Iterator[str]:
    engine = Engine.from_repository(model_folder.parent.parent)
    app = ASGIApp(V2Routes(DataPlane(engine, version=__version__)), max_body_bytes=1 << 20)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)  # not the main thread: no signals
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=20)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        engine.close(5)


async def read_events(url: str, body: dict[str, int], folder: Path) -> tuple[dict[str, str], list]:
    """POST to generate_stream; after each event, tell the model it was seen."""
    import aiohttp

    events = []
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        assert response.status == 200
        headers = dict(response.headers)
        async for line in response.content:
            if line.startswith(b"data: "):
                events.append(json.loads(line[len(b"data: ") :]))
                (folder / f"seen-{len(events) - 1}").touch()
    return headers, events


def clear(folder: Path) -> None:
    for seen in folder.glob("seen-*"):
        seen.unlink()


def test_events_arrive_one_by_one_as_the_model_yields_them(
    base_url: str, model_folder: Path
) -> None:
    clear(model_folder)
    url = f"{base_url}/v2/models/paced/generate_stream"
    headers, events = asyncio.run(
        asyncio.wait_for(read_events(url, {"COUNT": 4}, model_folder), 30)
    )
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers.get("Transfer-Encoding") == "chunked"
    assert [event["TEXT"] for event in events] == [f"token-{i}" for i in range(4)]
    assert all(event["model_name"] == "paced" for event in events)


def test_a_failure_after_the_first_event_is_an_error_event(
    base_url: str, model_folder: Path
) -> None:
    clear(model_folder)
    url = f"{base_url}/v2/models/paced/generate_stream"
    _, events = asyncio.run(
        asyncio.wait_for(read_events(url, {"COUNT": 3, "FAIL_AT": 1}, model_folder), 30)
    )
    assert events[0]["TEXT"] == "token-0"
    assert "failed before response 1" in events[1]["error"]
    assert len(events) == 2


def test_an_unknown_model_is_a_json_404_before_any_event(base_url: str) -> None:
    async def post() -> tuple[int, dict[str, str]]:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            url = f"{base_url}/v2/models/nope/generate_stream"
            async with session.post(url, json={"COUNT": 1}) as response:
                return response.status, await response.json()

    status, body = asyncio.run(post())
    assert status == 404
    assert "nope" in body["error"]


ENDLESS = """
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


class Model:
    def infer(self, inputs):
        try:
            for index in range(1000):  # 10 s at most: a stream nobody stops still ends
                yield {"TEXT": np.array([f"token-{index}".encode()], dtype=object)}
                time.sleep(0.01)
        finally:
            (HERE / "closed").write_text(str(index))  # GeneratorExit, or the natural end
"""


def test_a_client_that_disconnects_stops_the_model(base_url: str, model_folder: Path) -> None:
    """uvicorn drops what is sent after the client left, rather than raising: the app
    watches for the client's http.disconnect and closes the stream, and so the model."""
    endless = model_folder.parent.parent / "endless" / "1"
    (endless / "closed").unlink(missing_ok=True)

    async def read_one_and_leave() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            url = f"{base_url}/v2/models/endless/generate_stream"
            async with session.post(url, json={"COUNT": 1}) as response:
                assert (await response.content.readline()).startswith(b"data: ")

    asyncio.run(asyncio.wait_for(read_one_and_leave(), 30))
    wait_until(lambda: (endless / "closed").exists(), timeout=5, what="the model to be stopped")
    assert int((endless / "closed").read_text()) < 500  # stopped early, not at its end
