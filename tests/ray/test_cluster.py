"""docs/ray.md as a user runs it: ``ray start --head`` (token authentication on, 2 CPUs),
then the page's own blocks, as printed, from a shell: ``conveyor ray deploy``, ``conveyor
ray status``, curl, tritonclient, ``build_app`` from Python. And what goes wrong for a new
user: a refused token, replicas that do not fit the cluster.

The commands reach the cluster through ``RAY_ADDRESS`` (its port is this test's own), the
one case where Ray itself sends no token unless ``RAY_AUTH_MODE=token`` is set.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray.serve")
pytest.importorskip("tritonclient.http")

from conveyor.testing import free_port
from tests.docs.doc_blocks import Block, read_blocks
from tests.models import RepoBuilder
from tests.ray.local_cluster import ROOT, RayHead, ray_head

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(420)]

DOC = ROOT / "docs" / "ray.md"
RUN_HERE = "run as printed by tests/ray/test_cluster.py"
COMMAND_TIMEOUT_S = 240  # one block: a deploy starts a process per replica


# Ray Serve reports a replica it cannot place after 30 s unless told otherwise; the cluster
# and the commands (through head.env) both read these, as docs/ray.md tells users to set
# them. 10 s, not less: a replica that is merely slow to be placed on a busy machine must
# not end the walkthrough's deploy.
SLOW_STARTUP = {
    "RAY_SERVE_SLOW_STARTUP_WARNING_S": "10",
    "RAY_SERVE_SLOW_STARTUP_WARNING_PERIOD_S": "10",
}


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHead]:
    with ray_head(tmp_path_factory.mktemp("head"), extra_env=SLOW_STARTUP) as started:
        yield started


@pytest.fixture(scope="module")
def http_port() -> int:
    """One for the module: Serve takes its HTTP port when it first starts on the cluster."""
    return free_port()


def doc_blocks() -> list[Block]:
    return read_blocks(DOC)


def conveyor_ray(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conveyor", "ray", *args],
        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, cwd=cwd,
    )  # fmt: skip


DELETE_APP = "import ray; from ray import serve; ray.init(); serve.delete('conveyor')"


def delete_app(head: RayHead) -> None:
    """Leave the cluster without the application, for the next test."""
    subprocess.run(
        [sys.executable, "-c", DELETE_APP], env={**head.env, "RAY_AUTH_MODE": "token"},
        check=True, capture_output=True, timeout=COMMAND_TIMEOUT_S,
    )  # fmt: skip


def test_the_page_marks_what_this_module_runs() -> None:
    ours = [b for b in doc_blocks() if b.marker == "not-tested" and RUN_HERE in (b.argument or "")]
    assert [b.language for b in ours] == ["bash", "python", "python"]
    assert "conveyor ray deploy models/" in ours[0].code


def test_replicas_no_node_can_hold_are_refused_before_anything_is_deployed(
    head: RayHead, tmp_path: Path
) -> None:
    repository = tmp_path / "big"
    models = RepoBuilder(repository)
    models.tiny()
    (repository / "tiny" / "config.toml").write_text("[ray]\nnum_cpus = 4\n")
    done = conveyor_ray(["deploy", str(repository), "--http-port", str(free_port())], head.env)
    assert done.returncode == 1, done.stderr
    assert "deployment model-tiny asks for 4 CPU per replica" in done.stderr
    assert "the largest node has 2 CPU" in done.stderr
    assert "Nothing was deployed" in done.stderr
    (repository / "tiny" / "config.toml").write_text("[ray]\nmin_replicas = 8\n")
    done = conveyor_ray(["deploy", str(repository), "--http-port", str(free_port())], head.env)
    assert done.returncode == 1, done.stderr
    assert "ask for 2.25 CPU in all" in done.stderr
    assert "model-tiny 8 x 0.25 CPU" in done.stderr
    status = conveyor_ray(["status"], head.env)
    assert status.returncode == 1
    assert "no application 'conveyor'" in status.stderr


def test_a_refused_token_stops_the_command_at_once_saying_what_to_set(
    head: RayHead, tmp_path: Path
) -> None:
    wrong = conveyor_ray(["status"], {**head.env, "RAY_AUTH_TOKEN": "0" * 32})
    assert wrong.returncode == 2, wrong.stderr
    assert "the token from the RAY_AUTH_TOKEN variable was refused" in wrong.stderr
    assert "ray get-auth-token" in wrong.stderr and "RAY_AUTH_MODE=token" in wrong.stderr
    assert "Failed to connect to Ray cluster" not in wrong.stderr  # Ray's 20 s of retries
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    none = conveyor_ray(["status"], {**head.env, "HOME": str(empty_home)})
    assert none.returncode == 2, none.stderr
    assert "uses token authentication and no token was found" in none.stderr


HOLD_CPUS = """
import time
import ray

ray.init(log_to_driver=False)


@ray.remote(num_cpus=1.5)
class Hold:
    def ready(self):
        return True


holder = Hold.remote()
ray.get(holder.ready.remote(), timeout=60)  # fails, and exits, if it cannot
print("holding", flush=True)
time.sleep(600)
"""


def test_replicas_others_leave_no_room_for_end_the_wait_naming_them(
    head: RayHead, tmp_path: Path, http_port: int
) -> None:
    """1.5 of the 2 CPUs held by another driver's actor: the 0.75 CPU asked fits the
    cluster, so the deploy starts, but a replica waits for a CPU that never frees up."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_CPUS], env={**head.env, "RAY_AUTH_MODE": "token"},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    ) as holder:  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
            repository = tmp_path / "crowded"
            RepoBuilder(repository).tiny()
            (repository / "tiny" / "config.toml").write_text("[ray]\nmin_replicas = 2\n")
            port = str(http_port)
            done = conveyor_ray(["deploy", str(repository), "--http-port", port], head.env)
        finally:
            holder.terminate()
            delete_app(head)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "asks for 0.25 CPU per replica and Ray cannot place a replica" in done.stderr
    assert "the cluster has 2 CPU on 1 node, 0 CPU free now" in done.stderr
    assert "The application stays deployed" in done.stderr
    assert "STARTING" in done.stdout  # progress was printed while it waited


def test_the_walkthrough_runs_as_printed(head: RayHead, tmp_path: Path, http_port: int) -> None:
    for block in doc_blocks():
        if block.marker == "file":
            assert block.argument is not None
            path = tmp_path / block.argument
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.code)
    deploy, client, compose = (
        b for b in doc_blocks() if b.marker == "not-tested" and RUN_HERE in (b.argument or "")
    )
    port = http_port

    def run(block: Block, extra: dict[str, str] | None = None) -> str:
        code = re.sub(r"\b8000\b", str(port), block.code)
        command = [sys.executable, "-c", code] if block.language == "python" else [
            "bash", "-euo", "pipefail", "-c", code
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=tmp_path, env={**head.env, **(extra or {})}, capture_output=True,
            text=True, timeout=COMMAND_TIMEOUT_S,
        )  # fmt: skip
        assert done.returncode == 0, f"{block.where}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    printed = run(deploy)
    assert "replicas to start:\n  conveyor-ingress 1 x 0.25 CPU\n" in printed
    assert "  model-negate 2 x 0.25 CPU\n" in printed
    assert "  model-negate: HEALTHY (RUNNING 2)\n" in printed
    assert f"serving models/ at http://127.0.0.1:{port}" in printed
    # conveyor ray status, in plain words
    assert "conveyor: RUNNING\n" in printed
    assert re.search(r"\n  model-double +HEALTHY +RUNNING 1\n", printed), printed
    assert "Status." not in printed  # no enum reprs (DeploymentStatus.HEALTHY)
    # curl
    assert '"data":[2.0,4.0,6.0,8.0]' in printed.replace(" ", "")
    assert "[[-1. -2. -3. -4.]]" in run(client)
    # A driver of one's own sends the token with RAY_AUTH_MODE=token, as the page says.
    run(compose, {"RAY_AUTH_MODE": "token"})
    status = conveyor_ray(["status"], head.env)
    assert status.returncode == 0, status.stderr
    # The token probe's expected refusal, and Ray's note that token mode is on, are not
    # printed: the command's plan, not a problem to show.
    assert "InvalidAuthToken" not in status.stderr, status.stderr
    assert "Token authentication is enabled" not in status.stderr, status.stderr
    assert re.search(r"\n  conveyor-ingress +HEALTHY +RUNNING 2\n", status.stdout), status.stdout
