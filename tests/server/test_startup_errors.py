"""``conveyor serve`` that cannot start says why in one line and exits non-zero, before any
port is opened when it can tell (a repository path that is not there), and naming the
option to change when a port is taken."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conveyor.testing import free_port


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "serve", "--host", "127.0.0.1", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("front_end", "option", "extra"),
    [
        ("HTTP", "--http-port", ()),
        ("gRPC", "--grpc-port", ()),
        ("gRPC", "--grpc-port", ("--grpc-transport", "grpcio")),
        ("metrics", "--metrics-port", ()),
        ("HTTP", "--http-port", ("--workers", "2")),
        ("gRPC", "--grpc-port", ("--workers", "2")),
    ],
)
def test_a_taken_port_names_the_front_end_and_its_option(
    front_end: str, option: str, extra: tuple[str, ...]
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        ports = {o: str(free_port()) for o in ("--http-port", "--grpc-port", "--metrics-port")}
        ports[option] = str(taken)
        out = serve(*(x for pair in ports.items() for x in pair), *extra)
    assert out.returncode == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("ERROR ")]
    assert len(errors) == 1, out.stderr
    assert f"cannot serve {front_end} on 127.0.0.1:{taken}: Address already in use" in errors[0]
    assert f"choose another port with {option}" in errors[0]
    assert "Traceback" not in out.stderr
    assert "ready: serving" not in out.stderr  # it never got as far as loading models


def test_a_repository_that_is_not_there_is_refused_before_any_port_opens(tmp_path) -> None:
    missing = tmp_path / "no-such-repository"
    port = free_port()
    out = serve(str(missing), "--http-port", str(port))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"conveyor serve: model repository {str(missing)!r} does not exist (the repository "
        "argument: a directory of <model>/<version>/ folders; leave it out for the built-in "
        "examples)"
    ]
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    out = serve(str(a_file), "--http-port", str(port))
    assert out.returncode == 2
    assert f"{str(a_file)!r} is not a directory" in out.stderr
    assert "listening" not in out.stderr


def test_a_model_folder_given_for_the_repository_is_refused_before_any_port_opens(
    tmp_path,
) -> None:
    model = tmp_path / "models" / "tiny"
    (model / "1").mkdir(parents=True)
    (model / "config.toml").write_text('backend = "onnxruntime"\n')
    (model / "1" / "model.onnx").write_bytes(b"")
    out = serve(str(model), "--http-port", str(free_port()))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"conveyor serve: {str(model)!r} is a model folder (it holds config.toml and version "
        f"folders 1/), not a model repository; give the folder above it: "
        f"{str(model.parent)!r} (layout: <repository>/<model>/<version>/<model file>)"
    ]
