"""A model's zygote: one process that loads the model once and forks its workers.

Why a zygote. Workers are forked, so the weights ``load()`` produced are shared copy-on-write
by every worker: numpy keeps each large array's data in its own allocation, which no
reference count or garbage collection ever writes to, so those pages stay shared for good.
Forking the workers from the engine process itself would fork a multi-threaded server
(instance threads, the event loop, gRPC) at any moment a worker needs replacing; the zygote
is forked from the engine once per load and is single-threaded from then on, so every
worker (the first ones and every replacement) is forked from a quiet process.

Lifetime. The zygote exits when the engine hangs up or dies (its channel reads end of file)
and SIGKILLs its workers first; each worker also has PR_SET_PDEATHSIG = SIGKILL, so a worker
can never outlive its zygote, even one that is itself SIGKILLed. SIGINT and SIGTERM are
ignored in both: a Ctrl-C or a service manager's SIGTERM reaches the server, which drains
its requests (which the workers are running) before it closes the engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import os
import signal
import socket
import sys
import traceback
import warnings
from pathlib import Path

from conveyor.backends import get_backend
from conveyor.backends.base import LoadedModel
from conveyor.engine.processes.channel import Channel
from conveyor.engine.processes.messages import (
    Failed,
    Loaded,
    Reap,
    Reaped,
    Spawn,
    Spawned,
    flatten_error,
)
from conveyor.engine.processes.worker import serve
from conveyor.repository.config import ModelConfig

_PR_SET_PDEATHSIG = 1


def fork_zygote(config: ModelConfig, version_dir: Path) -> tuple[int, Channel]:
    """Fork the zygote of ``config``'s model; it loads the model and reports on the channel.

    Returns the zygote's pid and the engine's end of its channel. The first message is
    Loaded (with the completed config) or Failed.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    # The fork happens once per model load; the child cleans up what it inherited from a
    # multi-threaded parent before doing anything else (see _become_clean).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the zygote: never returns into the engine's code
        status = 70
        try:
            _become_clean(keep=theirs.fileno())
            status = _zygote_main(config, version_dir, Channel(theirs))
        except BaseException:
            traceback.print_exc()
        finally:
            _exit(status)
    theirs.close()
    return pid, Channel(ours)


def _become_clean(keep: int) -> None:
    """Drop what the engine process left behind: fds, signal handlers, stdio locks."""
    # Every inherited fd (listening sockets, client connections, other models' buffers) is
    # pointed at /dev/null rather than closed: the engine's file is released in this process,
    # yet the number stays taken, so a stale Python object that closes "its" fd later can
    # never close a socket or buffer this process opened since.
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in (keep, null):
            os.dup2(null, fd, inheritable=False)  # (the listing's own fd included: harmless)
    # Fresh stdio objects: another engine thread may have held the old ones' locks at fork.
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
    if faulthandler.is_enabled():  # its fd may have been one of those closed above
        faulthandler.enable(file=sys.stderr)
    signal.set_wakeup_fd(-1)
    for number in signal.valid_signals():
        try:
            if callable(signal.getsignal(number)):
                signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # the forking thread's mask is inherited


def _zygote_main(config: ModelConfig, version_dir: Path, channel: Channel) -> int:
    try:
        backend = get_backend(config.backend)
        model = backend.load(config, version_dir)
        config = backend.complete_config(config, model)
    except Exception as exc:
        channel.send(Failed(0, flatten_error(exc, config.name)))
        return 0
    channel.send(Loaded(config))
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
                    pid = _fork_worker(model, config.name, fds[0], channel)
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
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in workers:
            _reap(pid)
        try:
            model.close()
        except Exception:
            traceback.print_exc()


def _fork_worker(model: LoadedModel, name: str, fd: int, control: Channel) -> int:
    zygote = os.getpid()
    pid = os.fork()
    if pid == 0:
        status = 0
        try:
            _die_with_parent()
            if os.getppid() != zygote:  # the zygote died before the line above took effect
                _exit(0)
            control.close()
            serve(model, name, Channel(socket.socket(fileno=fd)))
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
