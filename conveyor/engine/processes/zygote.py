"""A model's zygote: a clean process that loads the model once and forks its workers.

Why a zygote. Workers are forked, so the weights ``load()`` produced are shared copy-on-write
by every worker: numpy keeps each large array's data in its own allocation, which no
reference count or garbage collection ever writes to, so those pages stay shared for good.

Why a fresh interpreter. The engine process is no place to fork from: it runs threads
(instance threads, the event loop, gRPC), and libraries there install fork handlers that
expect their threads in the child. gRPC's do: a zygote once forked from the server hung in
gRPC's handler when it forked its first worker. So the zygote is a new interpreter, started
with exec (``subprocess``), that imports only conveyor's engine and the model, and stays
single-threaded: every worker, the first ones and every replacement, is forked from it.

Lifetime. The zygote and its workers carry PR_SET_PDEATHSIG = SIGKILL: the zygote is killed
when the engine process dies (its parent is a keeper thread that lives as long as the
zygote, so only the process's death ends it), and a worker when its zygote dies, even one
that hangs. The zygote also exits when the engine hangs up, SIGKILLing its workers first.
SIGINT and SIGTERM are ignored in both: a Ctrl-C or a service manager's SIGTERM reaches the
server, which drains the requests the workers are running before it closes the engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from conveyor.backends import get_backend
from conveyor.backends.base import LoadedModel
from conveyor.engine.processes.messages import (
    Failed,
    Load,
    Loaded,
    Reap,
    Reaped,
    Spawn,
    Spawned,
    flatten_error,
)
from conveyor.engine.processes.worker import serve
from conveyor.ipc.channel import Channel
from conveyor.repository.config import ModelConfig

_PR_SET_PDEATHSIG = 1

# What the new interpreter runs: die with the engine first, then import and serve.
_BOOT = (
    "import sys\n"
    "from conveyor.engine.processes.zygote import main\n"
    "main(int(sys.argv[1]), int(sys.argv[2]))\n"
)


class Zygote:
    """The engine's handle on a started zygote process."""

    def __init__(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        self.process = process
        self.channel = channel

    @property
    def pid(self) -> int:
        return self.process.pid

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def running(self) -> bool:
        return self.process.returncode is None and self.process.poll() is None

    def stop(self, grace: float) -> None:
        """Hang up; SIGKILL it if it has not exited within ``grace`` seconds."""
        self.channel.close()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_zygote(config: ModelConfig, version_dir: Path) -> Zygote:
    """Start ``config``'s zygote and ask it to load the model.

    Its first message on the returned channel is Loaded (with the completed config) or
    Failed.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    started: list[subprocess.Popen[bytes] | BaseException] = []
    ready = threading.Event()

    def keep() -> None:
        # PR_SET_PDEATHSIG fires when the thread that started the child exits, so the
        # thread that starts the zygote stays (waiting for it) as long as the zygote runs.
        try:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(os.getpid())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    env=_environment(),
                )
            )
        except BaseException as exc:
            started.append(exc)
        finally:
            ready.set()
        process = started[0]
        if isinstance(process, subprocess.Popen):
            process.wait()

    threading.Thread(target=keep, name=f"conveyor-{config.name}-zygote", daemon=True).start()
    ready.wait()
    theirs.close()
    process = started[0]
    if isinstance(process, BaseException):
        ours.close()
        raise process
    channel = Channel(ours)
    with contextlib.suppress(OSError):  # if it died at once, the caller reads end of file
        channel.send(Load(config, version_dir, tuple(sys.path)))
    return Zygote(process, channel)


def _environment() -> dict[str, str]:
    """The engine's environment, with conveyor importable however the engine found it."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def main(fd: int, engine_pid: int) -> None:
    """The zygote process: load the model, then fork workers until the engine hangs up."""
    status = 70
    try:
        _die_with_parent()
        if os.getppid() != engine_pid:  # the engine died before the line above took effect
            os._exit(0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        channel = Channel(socket.socket(fileno=fd))
        message, _ = channel.recv()
        if isinstance(message, Load):
            sys.path[:] = list(message.sys_path)  # the engine's: the model imports what it can
            status = _zygote_main(message.config, message.version_dir, channel)
    except (EOFError, BrokenPipeError, ConnectionResetError):
        status = 0  # the engine went away
    except BaseException:
        traceback.print_exc()
    finally:
        _exit(status)


def _zygote_main(config: ModelConfig, version_dir: Path, channel: Channel) -> int:
    try:
        backend = get_backend(config.backend)
        model = backend.load(config, version_dir)
        config = backend.complete_config(config, model)
    except Exception as exc:
        channel.send(Failed(0, flatten_error(exc, config.name)))
        return 0
    channel.send(Loaded(config, model.separate_requests, model.checks_outputs))
    # Move everything alive now out of the collector's reach: a collection in a worker would
    # otherwise write to every object's header and unshare the pages they live on.
    gc.collect()
    gc.freeze()
    workers: set[int] = set()
    try:
        while True:
            try:
                message, fds = channel.recv()
            except (EOFError, OSError):
                return 0  # the engine closed the model, or died
            if isinstance(message, Spawn):
                try:
                    pid = _fork_worker(model, config.name, fds[0], channel, message.index)
                finally:
                    for fd in fds:
                        os.close(fd)
                workers.add(pid)
                channel.send(Spawned(message.id, pid))
            elif isinstance(message, Reap):
                workers.discard(message.pid)
                channel.send(Reaped(message.id, message.pid, _reap(message.pid)))
            else:
                for fd in fds:
                    os.close(fd)
    finally:
        # The engine hung up on the workers first: let them finish (a Triton model's
        # finalize() runs then) for a moment before they are killed.
        _wait_for(workers, _WORKER_GRACE_S)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in workers:
            _reap(pid)
        try:
            model.close()
        except Exception:
            traceback.print_exc()


_WORKER_GRACE_S = 3.0  # below the engine's grace for the zygote itself


def _wait_for(workers: set[int], grace: float) -> None:
    """Collect the workers that exit within ``grace`` seconds (removed from ``workers``)."""
    deadline = time.monotonic() + grace
    while workers and time.monotonic() < deadline:
        for pid in list(workers):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                workers.discard(pid)
        if workers:
            time.sleep(0.01)


def _fork_worker(model: LoadedModel, name: str, fd: int, control: Channel, index: int) -> int:
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            _die_with_parent()
            if os.getppid() != zygote:  # the zygote died before the line above took effect
                _exit(0)
            control.close()
            serve(model, name, Channel(socket.socket(fileno=fd)), index)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            _exit(status)
    return pid


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def _reap(pid: int) -> str:
    """Wait for a worker that has ended (or was just SIGKILLed); how it ended, in words."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "had already been collected"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by signal {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _exit(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)
