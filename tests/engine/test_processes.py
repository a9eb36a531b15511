"""Process instances: real worker processes, shared memory, crashes, timeouts and cleanup.

The engine behaviours common to both instance kinds (futures, order, priorities, deadlines,
cancellation, queue limits, statistics, draining) run for process instances too, through
``both_kinds`` in test_futures.py, test_scheduling.py, test_inputs.py and test_repository.py.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import psutil
import pytest

import conveyor
from benchmarks import process_memory, process_scaling
from conveyor import Engine
from conveyor.examples import onnx_models
from conveyor.protocol.datatypes import numpy_dtype
from conveyor.repository.config import parse_config
from tests.models import RepoBuilder
from tests.polling import wait_until

pytestmark = pytest.mark.alone  # measures rate, time or memory: run after the parallel part

# -- helpers -------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def descendants(pid: int | None = None) -> set[int]:
    """Live processes below ``pid`` (default: this one), all the way down."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in found if alive(p.pid)}


def zygote_and_workers() -> tuple[int, set[int]]:
    """The one zygote this process runs now, and its live workers.

    Other children (multiprocessing's resource tracker, started by other tests) are not
    zygotes: a zygote is the interpreter that runs conveyor.engine.processes.zygote.
    """
    (zygote,) = [
        child
        for child in psutil.Process().children()
        if alive(child.pid) and "conveyor.engine.processes.zygote" in " ".join(child.cmdline())
    ]
    return zygote.pid, {p.pid for p in zygote.children() if alive(p.pid)}


def shm_names() -> set[str]:
    return set(os.listdir("/dev/shm"))


def new_shm_segments(before: set[str]) -> set[str]:
    """Shared-memory segments that appeared in /dev/shm since ``before`` and nobody holds.

    Other programs on a shared machine create their own while a test runs: those are open or
    mapped by their creators (a leak of ours would be held by no one), or are semaphores,
    which we never create.
    """
    new = {name for name in shm_names() - before if not name.startswith("sem.")}
    ours = descendants() | {os.getpid()}
    for pid in psutil.pids():
        if not new:
            break
        if pid in ours:
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                held = f.read()
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # it has exited
        held += " ".join(_link(f"/proc/{pid}/fd/{fd}") for fd in fds)
        new = {name for name in new if f"/dev/shm/{name}" not in held}
    return new


def buffer_maps(pid: int | str = "self") -> list[str]:
    """This process's mappings of our shared-memory buffers (memfds named conveyor-...)."""
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if "memfd:conveyor-" in line]


@contextlib.contextmanager
def leaves_nothing_behind() -> Iterator[None]:
    """No process, /dev/shm entry, buffer mapping or memfd is left over from the block."""
    processes, shm, maps, fds = descendants(), shm_names(), set(buffer_maps()), memfds()
    yield
    wait_until(
        lambda: descendants() == processes, 5, lambda: f"leftovers {descendants() - processes} gone"
    )
    assert new_shm_segments(shm) == set()
    assert set(buffer_maps()) - maps == set()
    assert memfds() - fds == set()


def memfds() -> set[str]:
    fds = os.listdir("/proc/self/fd")
    return {link for fd in fds if "memfd:" in (link := _link(f"/proc/self/fd/{fd}"))}


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def one_input(extra: str = "") -> str:
    return f"""
    backend = "python"
    instance_kind = "process"
    {extra}
    [[inputs]]
    name = "INPUT0"
    datatype = "INT32"
    shape = [1]
    [[outputs]]
    name = "OUTPUT0"
    datatype = "INT64"
    shape = [1]
    """


# -- shared weights, one load ----------------------------------------------------------------

COUNTED = """
import os
import time
import numpy as np

class Model:
    thread_safe = False  # a process instance has its own (copy-on-write) object anyway

    def load(self, config):
        with open(self.version_dir / "loads.txt", "a") as f:
            f.write(f"{os.getpid()}\\n")

    def infer(self, inputs):
        time.sleep(0.2)
        return {"OUTPUT0": np.array([os.getpid()], np.int64)}
"""


def test_workers_are_forked_from_one_load_in_a_zygote(repo: RepoBuilder):
    folder = repo.python("counted", COUNTED, one_input(extra="instances = 3"))
    with leaves_nothing_behind(), Engine.from_repository(repo.path) as engine:
        assert engine.model("counted").config.instance_kind == "process"
        x = {"INPUT0": np.zeros(1, np.int32)}
        futures = [engine.submit("counted", x) for _ in range(6)]
        pids = {int(f.result(10)["OUTPUT0"][0]) for f in futures}
        zygote, workers = zygote_and_workers()
        loads = (folder / "1" / "loads.txt").read_text().split()
    assert loads == [str(zygote)]  # load() ran once, in the zygote, not in the engine
    assert pids <= workers and len(workers) == 3  # which workers ran the 6 is up to timing
    assert os.getpid() not in pids


def test_four_workers_hold_the_weights_once(tmp_path: Path):
    # Each configuration is served in a child process of its own: its memory is the measure.
    one, four = (process_memory.measure(name, 256, tmp_path) for name in ("process-1", "process-4"))
    results = {"process-1": one, "process-4": four}
    assert four["workers_seen"] == 4 and four["processes"] == one["processes"] + 3
    assert four["pss"] <= 1.25 * one["pss"], results
    assert four["rss"] > 3 * 256 * 2**20  # each worker does map the 256 MiB: it is shared


# -- tensors through shared memory ---------------------------------------------------------

DATATYPES = ["BOOL", "UINT8", "INT16", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"]

ECHO = """
import numpy as np

class Model:
    def infer(self, inputs):
        out = {"O" + name[1:]: value.copy() for name, value in inputs.items()}
        if "I_FP32" in inputs:
            out["STRIDED"] = inputs["I_FP32"][::2]  # a non-contiguous view of the input
            out["TEXT"] = np.array(["plain", "\\u00e9t\\u00e9"], dtype=object)
            out["UNICODE"] = np.array(["ab", "c"])  # dtype <U2
        return out
"""


def echo_config() -> str:
    tensors = []
    for datatype in DATATYPES:
        tensors.append(
            f'[[inputs]]\nname = "I_{datatype}"\ndatatype = "{datatype}"\nshape = [-1]\n'
            "optional = true\n"
        )
        tensors.append(
            f'[[outputs]]\nname = "O_{datatype}"\ndatatype = "{datatype}"\nshape = [-1]\n'
        )
    tensors.append('[[outputs]]\nname = "STRIDED"\ndatatype = "FP32"\nshape = [-1]\n')
    tensors.append('[[outputs]]\nname = "TEXT"\ndatatype = "BYTES"\nshape = [2]\n')
    tensors.append('[[outputs]]\nname = "UNICODE"\ndatatype = "BYTES"\nshape = [2]\n')
    return 'backend = "python"\ninstances = 1\n' + "\n".join(tensors)


@pytest.fixture
def echo(tmp_path):
    repo = RepoBuilder(tmp_path / "models", "process")
    repo.python("echo", ECHO, echo_config())
    with Engine.from_repository(repo.path) as engine:
        yield engine


def sample(datatype: str, n: int) -> np.ndarray:
    if datatype == "BYTES":
        return np.array([bytes([i % 256]) * (i % 7) for i in range(n)], dtype=object)
    if datatype == "BOOL":
        return np.arange(n) % 3 == 0
    if datatype == "BF16":
        return np.arange(n).astype(ml_dtypes.bfloat16)
    return (np.arange(n) % 100).astype(numpy_dtype(datatype))


def test_every_datatype_crosses_unchanged(echo):
    for datatype in DATATYPES:  # one engine for all: starting a zygote takes ~0.8 s
        for n in (0, 1, 1000):
            x = sample(datatype, n)
            out = echo.submit("echo", {f"I_{datatype}": x}, outputs=[f"O_{datatype}"])
            got = out.result(10)[f"O_{datatype}"]
            assert (got.dtype, got.shape) == (x.dtype, x.shape), (datatype, n)
            assert got.tolist() == x.tolist(), (datatype, n)


def test_large_tensors_views_and_text_outputs(echo):
    x = np.random.default_rng(0).standard_normal(4 * 2**20 // 4).astype(np.float32)  # 4 MiB
    wanted = ["O_FP32", "STRIDED", "TEXT", "UNICODE"]
    for _ in range(3):  # the same buffers serve every request
        out = echo.submit("echo", {"I_FP32": x}, outputs=wanted).result(10)
        np.testing.assert_array_equal(out["O_FP32"], x)
        np.testing.assert_array_equal(out["STRIDED"], x[::2])
    assert out["TEXT"].tolist() == [b"plain", "\u00e9t\u00e9".encode()]
    assert out["UNICODE"].tolist() == [b"ab", b"c"]
    small = echo.submit("echo", {"I_FP32": x[:3]}, outputs=["O_FP32"]).result(10)
    assert small["O_FP32"].tolist() == x[:3].tolist()


BATCHED = """
import numpy as np

class Model:
    def infer(self, inputs):
        x = inputs["INPUT0"]
        return {"OUTPUT0": x * 2, "SIZE": np.full((len(x), 1), len(x), np.int64)}
"""

BATCHED_CONFIG = """
backend = "python"
instance_kind = "process"
instances = 1
max_batch_size = 8
[dynamic_batching]
max_queue_delay_us = 300000
[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [3]
[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [3]
[[outputs]]
name = "SIZE"
datatype = "INT64"
shape = [1]
"""


def test_dynamic_batches_run_in_the_worker_and_split_back_exactly(repo: RepoBuilder):
    repo.python("batched", BATCHED, BATCHED_CONFIG)
    arrays = [np.full((k, 3), k, np.float32) for k in (1, 2, 1, 3)]
    with Engine.from_repository(repo.path) as engine:
        barrier = threading.Barrier(len(arrays))
        futures: list = [None] * len(arrays)

        def submit(i: int) -> None:
            barrier.wait(5)
            futures[i] = engine.submit("batched", {"INPUT0": arrays[i]})

        threads = [threading.Thread(target=submit, args=(i,)) for i in range(len(arrays))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        results = [f.result(10) for f in futures]
        stats = engine.statistics("batched")[0]
    for array, out in zip(arrays, results, strict=True):
        np.testing.assert_array_equal(out["OUTPUT0"], array * 2)
    assert max(int(out["SIZE"][0, 0]) for out in results) > 1
    assert stats.inference_count == 7 and stats.execution_count < 4


# -- faults --------------------------------------------------------------------------------

CRASHY = """
import ctypes
import os
import signal
import time
import numpy as np

class Model:
    def infer(self, inputs):
        mode = int(inputs["INPUT0"][0])
        if mode == 1:
            os._exit(3)
        if mode == 2:
            ctypes.string_at(0)  # segmentation fault
        if mode == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == 4:
            time.sleep(30)
        if mode == 5:
            time.sleep(0.3)
        if mode == 6:  # says that it has started, then runs for a second
            (self.version_dir / "running").touch()
            time.sleep(1.0)
        return {"OUTPUT0": np.array([os.getpid()], np.int64)}
"""


def mode(value: int) -> dict[str, np.ndarray]:
    return {"INPUT0": np.array([value], np.int32)}


@pytest.mark.parametrize(
    ("crash", "how"),
    [
        (1, "exited with status 3"),
        (2, "was killed by signal SIGSEGV"),
        (3, "was killed by signal SIGKILL"),
    ],
)
def test_a_crashing_worker_fails_only_the_request_it_held(repo: RepoBuilder, crash, how):
    repo.python("crashy", CRASHY, one_input(extra="instances = 1"))
    with leaves_nothing_behind(), Engine.from_repository(repo.path) as engine:
        before = int(engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0])
        doomed = engine.submit("crashy", mode(crash))
        queued = [engine.submit("crashy", mode(0)) for _ in range(3)]
        with pytest.raises(conveyor.ModelError) as info:
            doomed.result(10)
        assert f"model 'crashy': its worker process {before} {how} while running this request" in (
            str(info.value)
        )
        after = {int(f.result(10)["OUTPUT0"][0]) for f in queued}
        assert len(after) == 1 and before not in after  # a replacement ran the queued ones
        assert engine.ready and engine.repository_index()[0].state == "READY"
        stats = engine.statistics("crashy")[0]
    assert (stats.success.count, stats.fail.count) == (4, 1)


def test_a_worker_killed_from_outside_fails_only_its_own_request(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    with Engine.from_repository(repo.path) as engine:
        _, workers = zygote_and_workers()
        futures = [engine.submit("crashy", mode(5)) for _ in range(2)]  # one on each worker
        time.sleep(0.1)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        errors = [f.exception(10) for f in futures]
        failed = [e for e in errors if e is not None]
        assert len(failed) == 1
        assert f"worker process {victim} was killed by signal SIGKILL" in str(failed[0])
        pids = {int(engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0]) for _ in range(6)}
        _, now = zygote_and_workers()
        assert victim not in now and len(now) == 2 and pids <= now


def test_a_worker_that_dies_while_idle_fails_nothing(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 1"))
    with Engine.from_repository(repo.path) as engine:
        pid = int(engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0])
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not alive(pid), 5, f"process {pid} gone")
        for _ in range(3):
            assert engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0] != pid
        assert engine.statistics("crashy")[0].fail.count == 0


def test_a_worker_past_the_execution_timeout_is_killed_and_replaced(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 1\nexecution_timeout_s = 0.5"))
    with leaves_nothing_behind(), Engine.from_repository(repo.path) as engine:
        pid = int(engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0])
        started = time.monotonic()
        with pytest.raises(
            conveyor.ModelError,
            match=rf"did not finish within its execution_timeout_s of 0.5 s; its worker "
            rf"process {pid} was killed and replaced",
        ):
            engine.submit("crashy", mode(4)).result(10)
        assert 0.45 <= time.monotonic() - started < 3
        wait_until(lambda: not alive(pid), 5, f"process {pid} gone")
        assert engine.submit("crashy", mode(5)).result(10)["OUTPUT0"][0] != pid  # 0.3 s is fine


def test_a_dead_zygote_is_replaced_and_the_model_keeps_serving(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    with leaves_nothing_behind(), Engine.from_repository(repo.path) as engine:
        zygote, workers = zygote_and_workers()
        os.kill(zygote, signal.SIGKILL)
        wait_until(lambda: not any(alive(p) for p in workers | {zygote}), 5, "every process gone")
        for _ in range(4):
            assert engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0] not in workers
        new_zygote, new_workers = zygote_and_workers()
        assert new_zygote != zygote and len(new_workers) == 2
        assert engine.statistics("crashy")[0].fail.count == 0


def test_a_killed_worker_leaves_no_buffer_mapped(echo):
    x = {"I_FP32": np.ones(2**20, np.float32)}  # 4 MiB: buffers beyond the first size
    echo.submit("echo", x, outputs=["O_FP32"]).result(10)
    maps = len(buffer_maps())
    assert maps >= 2  # this slot's input buffer and its worker's output buffer
    _, (worker,) = zygote_and_workers()
    os.kill(worker, signal.SIGKILL)
    wait_until(lambda: not alive(worker), 5, f"worker {worker} gone")
    echo.submit("echo", x, outputs=["O_FP32"]).result(10)  # served by a replacement
    assert len(buffer_maps()) == maps  # the dead worker's output buffer was unmapped


# -- lifetime ------------------------------------------------------------------------------


def test_close_stops_every_process_and_frees_every_buffer(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    before = descendants()
    with leaves_nothing_behind():
        engine = Engine.from_repository(repo.path)
        for _ in range(4):
            engine.submit("crashy", mode(0)).result(10)
        assert len(descendants() - before) == 3  # the zygote and two workers
        assert buffer_maps()
        engine.close()


def test_close_with_a_timeout_does_not_wait_for_a_hung_worker(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 1"))
    with leaves_nothing_behind():
        engine = Engine.from_repository(repo.path)
        hung = engine.submit("crashy", mode(4))
        time.sleep(0.2)
        started = time.monotonic()
        engine.close(timeout=0.3)
        assert time.monotonic() - started < 3
        with pytest.raises(conveyor.ModelError, match="closed while this request was running"):
            hung.result(1)


def test_unloading_stops_the_processes(repo: RepoBuilder):
    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    with Engine.from_repository(repo.path, model_control="explicit") as engine:
        before = descendants()
        with leaves_nothing_behind():
            engine.load_model("crashy")
            engine.submit("crashy", mode(0)).result(10)
            assert len(descendants() - before) == 3  # the zygote and two workers
            engine.unload_model("crashy")
        engine.load_model("crashy")  # and loads again
        assert engine.submit("crashy", mode(0)).result(10)["OUTPUT0"][0] > 0


def test_the_zygote_and_workers_ignore_sigint_and_sigterm(repo: RepoBuilder):
    # A Ctrl-C or a service manager signals the whole process group; the engine decides
    # when its workers stop (after draining), not the signal.
    repo.python("crashy", CRASHY, one_input(extra="instances = 1"))
    with Engine.from_repository(repo.path) as engine:
        zygote, (worker,) = zygote_and_workers()
        running = engine.submit("crashy", mode(5))
        time.sleep(0.1)
        for pid in (zygote, worker):
            os.kill(pid, signal.SIGINT)
            os.kill(pid, signal.SIGTERM)
        assert running.result(10)["OUTPUT0"][0] == worker
        assert zygote_and_workers() == (zygote, {worker})


HOLDER = """
import sys, time
import numpy as np, psutil
from conveyor import Engine

engine = Engine.from_repository(sys.argv[1])
busy = engine.submit("crashy", {"INPUT0": np.array([4], np.int32)})  # a worker, busy for 30 s
time.sleep(0.3)
print(" ".join(str(p.pid) for p in psutil.Process().children(recursive=True)), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_no_process_outlives_a_killed_engine_process(repo: RepoBuilder, sig):
    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    shm = shm_names()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(repo.path)], stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in holder.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(pids) == 3
        holder.send_signal(sig)
        holder.wait(10)
    finally:
        holder.kill()
        holder.wait(10)
        holder.stdout.close()  # type: ignore[union-attr]
    wait_until(
        lambda: not any(alive(p) for p in pids),
        5,
        lambda: f"alive {[p for p in pids if alive(p)]} gone",
    )
    assert new_shm_segments(shm) == set()


def infer_over(url: str, grpc: bool, value: int) -> int:
    if grpc:
        import tritonclient.grpc as client_module
    else:
        import tritonclient.http as client_module  # type: ignore[no-redef]
    client = client_module.InferenceServerClient(url.split("://")[1])
    x = client_module.InferInput("INPUT0", [1], "INT32")
    x.set_data_from_numpy(np.array([value], np.int32))
    return int(client.infer("crashy", [x]).as_numpy("OUTPUT0")[0])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_real_server_serves_process_instances_and_leaves_nothing(repo: RepoBuilder, sig):
    # The server process runs gRPC, whose fork handlers hang a child forked from it: the
    # zygote is therefore a fresh interpreter. This test is what found that.
    from conveyor.testing import run_server

    repo.python("crashy", CRASHY, one_input(extra="instances = 2"))
    shm = shm_names()
    with run_server(repo.path) as server:
        tree = descendants(server.process.pid)
        assert len(tree) == 3, server.output()  # the zygote and two workers
        pids = {infer_over(server.http_url, False, 0) for _ in range(4)}
        pids |= {infer_over(server.grpc_url, True, 0) for _ in range(4)}
        assert pids <= tree
        # Two requests of 0.3 s at once: while one worker runs the first, the other must
        # take the second (sequential requests may all land on one worker).
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            both = set(
                pool.map(
                    lambda grpc: infer_over(server.grpc_url if grpc else server.http_url, grpc, 5),
                    (False, True),
                )
            )
        assert both <= tree and len(both) == 2
        in_flight: dict[str, object] = {}

        def run() -> None:
            try:
                in_flight["pid"] = infer_over(server.http_url, False, 6)
            except Exception as exc:  # the SIGKILL case
                in_flight["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        marker = repo.path / "crashy" / "1" / "running"
        wait_until(marker.exists, 10, f"{marker} written")
        server.process.send_signal(sig)
        server.process.wait(30)
        thread.join(10)
        if sig == signal.SIGTERM:  # drained: the request it was running finished first
            assert server.process.returncode == 0, server.output()
            assert in_flight.get("pid") in tree, in_flight
        else:
            assert "error" in in_flight
    wait_until(
        lambda: not any(alive(p) for p in tree),
        5,
        lambda: f"alive {[p for p in tree if alive(p)]} gone",
    )
    assert new_shm_segments(shm) == set()


# -- configuration and errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"instance_kind": "process", "execution_timeout_s": 0}, "must be a positive number"),
        ({"instance_kind": "process", "execution_timeout_s": -1.5}, "must be a positive number"),
        ({"instance_kind": "process", "execution_timeout_s": "5"}, "must be a positive number"),
        ({"instance_kind": "process", "execution_timeout_s": True}, "must be a positive number"),
        ({"execution_timeout_s": 0}, "must be a positive number"),
        ({"instance_kind": "fork"}, "instance_kind must be one of"),
    ],
)
def test_bad_process_settings_are_refused(raw, message):
    with pytest.raises(conveyor.RepositoryError, match=message):
        parse_config("m", {"backend": "python", **raw})


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_execution_timeout_is_read_for_both_kinds(kind):
    raw = {"backend": "python", "instance_kind": kind, "execution_timeout_s": 2}
    assert parse_config("m", raw).execution_timeout_s == 2.0


LOAD_FAILS = """
class Model:
    def load(self, config):
        raise RuntimeError("no GPU here")

    def infer(self, inputs):
        return {}
"""


def test_models_that_cannot_run_in_processes_are_reported(repo: RepoBuilder):
    repo.onnx("tiny", onnx_models.tiny, 'instance_kind = "process"\n')
    repo.python("fails", LOAD_FAILS, one_input())
    with leaves_nothing_behind(), Engine.from_repository(repo.path) as engine:
        index = {entry.name: entry for entry in engine.repository_index()}
    assert index["tiny"].state == "UNAVAILABLE"
    assert 'instance_kind "process" is for python models' in index["tiny"].reason
    assert index["fails"].state == "UNAVAILABLE"
    assert "RuntimeError: no GPU here" in index["fails"].reason


RAISES = """
import numpy as np
import conveyor

class Odd(Exception):
    def __init__(self):
        super().__init__("no pickling me")
        self.callback = lambda: None  # an exception that cannot be pickled

class Refused(conveyor.InvalidInput):  # a model's own ConveyorError subclass
    pass

class Model:
    def infer(self, inputs):
        if inputs["INPUT0"][0] == 1:
            raise Odd()
        raise Refused("the model refuses this input")
"""


def test_model_exceptions_cross_as_conveyor_errors(repo: RepoBuilder):
    repo.python("raises", RAISES, one_input())
    with Engine.from_repository(repo.path) as engine:
        with pytest.raises(conveyor.ModelError, match="model 'raises' failed: Odd: no pickling me"):
            engine.submit("raises", mode(1)).result(10)
        with pytest.raises(conveyor.InvalidInput, match="the model refuses this input"):
            engine.submit("raises", mode(2)).result(10)


# -- scaling -------------------------------------------------------------------------------


SPIN = """
import time
wall, cpu = time.perf_counter(), time.process_time()
while time.perf_counter() - wall < 0.5:
    pass
print((time.process_time() - cpu) / (time.perf_counter() - wall))
"""


def free_cores(count: int = 2) -> float:
    """The smallest share of a core each of ``count`` spinning processes gets right now."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    shares = [float(p.communicate(timeout=30)[0]) for p in spinners]
    return min(shares)


@pytest.mark.slow
def test_process_instances_scale_a_gil_bound_model_where_threads_do_not():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    share = free_cores()
    if share < 0.85:  # other programs on these cores would decide a throughput test
        pytest.skip(f"two cores are not free (a spinning process got {share:.0%} of one)")
    loops = process_scaling.loop_count(8.0)  # a request of ~8 ms
    rows = process_scaling.summarise(process_scaling.measure(loops, rounds=8, window=0.3))
    results = {(r["kind"], r["instances"]): r for r in rows}
    process = results[("process", 2)]["speedup_rounds"]  # x2 / x1, round by round
    thread = results[("thread", 2)]["speedup"]  # the median over rounds
    # On two idle cores process x2 / x1 is ~2.0 in every round (docs/benchmarks.md). Other programs
    # on these cores pull a round down towards 1.0 (a busy process takes the core our second
    # worker needs), and a burst in mid-run is invisible to the probe above, so this asks
    # only for two rounds that scale. Outside load can hardly lift threads' median above 1.
    scaled = sum(ratio >= 1.6 for ratio in process)
    if scaled < 2 and free_cores() < 0.85:
        pytest.skip(f"the cores became busy during the run (x2 / x1 by round: {process})")
    assert scaled >= 2, results
    assert thread <= 1.25, results
