"""The server's settings: one dataclass, and the command-line options generated from it.

Each field is typed once, here, with its help text in the field's metadata; ``conveyor
serve`` builds its options from these fields and turns the parsed options back into a
:class:`Settings`, so the parameter list is never written out twice. The generic part
(dataclass fields -> argparse options) is ``conveyor.options``, shared with ``conveyor
bench``.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conveyor import options
from conveyor.engine.engine import ModelControl
from conveyor.errors import RepositoryError
from conveyor.protocol.limits import DEFAULT_MAX_MESSAGE_BYTES
from conveyor.protocol.shared_memory import is_loopback
from conveyor.repository.checks import check_root
from conveyor.server import stream_send
from conveyor.server.grpc.h2 import limits as h2_limits
from conveyor.server.log_settings import LogFormat, LogSettings
from conveyor.server.tracing.config import TraceConfig, parse_trace_config

# Defaults that other modules use too (each front end's own keyword defaults), written once.
DEFAULT_DRAIN_TIMEOUT_S = 30.0
DEFAULT_HTTP_HEADER_TIMEOUT_S = 10.0
DEFAULT_HTTP_BODY_TIMEOUT_S = 30.0
DEFAULT_HTTP_KEEP_ALIVE_S = 30.0
# listen(2)'s backlog: asyncio's default of 100 drops a burst's SYNs past it, and each dropped
# client waits a second to retry; uvicorn uses 2048 too.
DEFAULT_LISTEN_BACKLOG = 2048
# Triton's default for --repository-poll-secs.
DEFAULT_REPOSITORY_POLL_S = 15.0
# Where the bearer token may come from instead of --auth-token (which other local users can
# read in the process list). Read by :meth:`Settings.with_environment` only, never at import.
AUTH_TOKEN_ENV = "CONVEYOR_AUTH_TOKEN"


_option = options.option


class SharedMemoryMode(enum.StrEnum):
    """Whether clients may pass tensors in system shared memory (Triton's extension)."""

    AUTO = "auto"  # on when the server listens on loopback only (its clients are local)
    SYSTEM = "system"  # on, whatever the host
    OFF = "off"


class GrpcTransport(enum.StrEnum):
    """Which HTTP/2 implementation serves gRPC (the service is the same either way)."""

    CONVEYOR = "conveyor"  # our own, on the event loop (conveyor.server.grpc.h2): faster
    GRPCIO = "grpcio"  # grpcio's grpc.aio server


@dataclasses.dataclass(frozen=True)
class Settings:
    repository: str | None = dataclasses.field(
        default=None,
        metadata=_option(
            "model repository directory (default: the built-in example models)", positional=True
        ),
    )
    host: str = dataclasses.field(
        default="127.0.0.1",
        metadata=_option(
            "address to listen on; loopback by default so a fresh install is not exposed "
            "to the network (use 0.0.0.0 to serve other machines)"
        ),
    )
    http_port: int = dataclasses.field(default=8000, metadata=_option("HTTP/REST port"))
    grpc_port: int = dataclasses.field(default=8001, metadata=_option("gRPC port"))
    metrics_port: int = dataclasses.field(
        default=8002, metadata=_option("Prometheus metrics port (GET /metrics)")
    )
    workers: int = dataclasses.field(
        default=1,
        metadata=_option(
            "front-end processes serving HTTP and gRPC (parsing, decoding, encoding on every "
            "core) over this process's one engine; 1: in this process, as always; 0: one per "
            "core this process may use, at most 32 (on one core: in this process)"
        ),
    )
    front_end_process: bool = dataclasses.field(
        default=False,
        metadata=_option(
            "with --workers 1 (or 0 on one core): serve HTTP and gRPC from one front-end "
            "process beside the engine's, as --workers N does (a front end that dies is "
            "replaced while the models stay loaded); more front ends (--workers N, or 0 on "
            "several cores) always run in processes"
        ),
    )
    metrics: bool = dataclasses.field(default=True, metadata=_option("serve Prometheus metrics"))
    model_control: ModelControl = dataclasses.field(
        default=ModelControl.NONE,
        metadata=_option(
            "none: load every model at start, no load/unload; explicit: load only "
            "--load-model models at start and allow load/unload requests; poll: load every "
            "model at start, then follow the repository's changes (--repository-poll-secs), "
            "no load/unload requests"
        ),
    )
    repository_poll_secs: float | None = dataclasses.field(
        default=None,
        metadata=_option(
            "with --model-control poll: seconds between scans of the repository for added, "
            f"changed and removed models; must be > 0 (default: {DEFAULT_REPOSITORY_POLL_S:g}, "
            "as Triton's)"
        ),
    )
    load_model: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=_option(
            "with --model-control explicit: a model to load at start (repeat for more; "
            "'*' loads every model of the repository, as Triton's --load-model=*)"
        ),
    )
    gpu_instances_on_cpu: bool = dataclasses.field(
        default=False,
        metadata=_option(
            "run config.pbtxt instance groups of kind KIND_GPU on the CPU (with a warning) "
            "instead of failing those models to load; Conveyor runs every model on the CPU"
        ),
    )
    strict_readiness: bool = dataclasses.field(
        default=True,
        metadata=_option(
            "as Triton's --strict-readiness: /v2/health/ready (and gRPC ServerReady) answer "
            "not ready while any model the server was asked to load is not READY (e.g. it "
            "failed to load); with --no-strict-readiness a failed model leaves the server "
            "ready (the model's own readiness stays false)"
        ),
    )
    max_body_bytes: int = dataclasses.field(
        default=DEFAULT_MAX_MESSAGE_BYTES,
        metadata=_option(
            "largest request body accepted, after decompression (larger: 400, before reading)"
        ),
    )
    grpc_max_message_bytes: int = dataclasses.field(
        default=DEFAULT_MAX_MESSAGE_BYTES,
        metadata=_option("largest gRPC message accepted or sent (larger: RESOURCE_EXHAUSTED)"),
    )
    grpc_transport: GrpcTransport = dataclasses.field(
        default=GrpcTransport.CONVEYOR,
        metadata=_option(
            "gRPC's HTTP/2 server: conveyor (our own, on the event loop; faster) or grpcio "
            "(grpcio's grpc.aio server)"
        ),
    )
    grpc_max_concurrent_streams: int = dataclasses.field(
        default=h2_limits.DEFAULT_MAX_CONCURRENT_STREAMS,
        metadata=_option(
            "gRPC calls one connection may have open at once (HTTP/2's "
            "SETTINGS_MAX_CONCURRENT_STREAMS); past it, a new call is refused with "
            "REFUSED_STREAM, which clients retry"
        ),
    )
    grpc_max_header_list_bytes: int = dataclasses.field(
        default=h2_limits.DEFAULT_MAX_HEADER_LIST_BYTES,
        metadata=_option(
            "largest gRPC call headers (metadata) accepted, decoded, counting 32 bytes per "
            "field as HTTP/2 does (SETTINGS_MAX_HEADER_LIST_SIZE); a call that sends more is "
            "refused (RESOURCE_EXHAUSTED), and past four times the limit its connection is "
            "closed (GOAWAY ENHANCE_YOUR_CALM)"
        ),
    )
    grpc_handshake_timeout: float = dataclasses.field(
        default=h2_limits.DEFAULT_HANDSHAKE_TIMEOUT_S,
        metadata=_option(
            "seconds a new gRPC connection has to send its HTTP/2 preface and SETTINGS "
            "before it is closed (0: no limit)"
        ),
    )
    grpc_idle_timeout: float = dataclasses.field(
        default=h2_limits.DEFAULT_IDLE_TIMEOUT_S,
        metadata=_option(
            "seconds a gRPC connection may stay without a call before the server sends "
            "GOAWAY and closes it (0: never, as grpcio's default)"
        ),
    )
    grpc_send_timeout: float = dataclasses.field(
        default=h2_limits.DEFAULT_SEND_TIMEOUT_S,
        metadata=_option(
            "seconds a gRPC response may wait for its client to take more of it (window, "
            "or reading the socket) before the call is reset with CANCEL (0: no limit; "
            "Conveyor's own transport)"
        ),
    )
    stream_send_timeout: float = dataclasses.field(
        default=stream_send.DEFAULT_STREAM_SEND_TIMEOUT_S,
        metadata=_option(
            "seconds a streamed response (gRPC ModelStreamInfer, HTTP generate_stream) may "
            "wait for its client to read before the stream is ended with an error and its "
            "request cancelled, so the model instance serves others (0: no limit)"
        ),
    )
    backlog: int = dataclasses.field(
        default=DEFAULT_LISTEN_BACKLOG,
        metadata=_option(
            "connections the kernel may hold for the HTTP and metrics ports before the server "
            "accepts them (listen backlog; Linux caps it at net.core.somaxconn); past it, "
            "a burst of new clients waits a second or more to retry"
        ),
    )
    drain_timeout: float = dataclasses.field(
        default=DEFAULT_DRAIN_TIMEOUT_S,
        metadata=_option(
            "seconds to let in-flight requests finish on SIGTERM/SIGINT before giving up"
        ),
    )
    auth_token: str | None = dataclasses.field(
        default=None,
        repr=False,  # never in a log line or a traceback
        metadata=_option(
            "require 'Authorization: Bearer TOKEN' on every HTTP request and gRPC call except "
            f"the server health checks (default: ${AUTH_TOKEN_ENV} if set, else no auth)"
        ),
    )
    tls_cert: str | None = dataclasses.field(
        default=None,
        metadata=_option("PEM certificate (chain) file: serve HTTP, gRPC and metrics over TLS"),
    )
    tls_key: str | None = dataclasses.field(
        default=None, metadata=_option("PEM private key file for --tls-cert")
    )
    http_header_timeout: float = dataclasses.field(
        default=DEFAULT_HTTP_HEADER_TIMEOUT_S,
        metadata=_option(
            "seconds a client may take to send a request's line and headers, from its first "
            "byte; slower: 408 and the connection is closed"
        ),
    )
    http_body_timeout: float = dataclasses.field(
        default=DEFAULT_HTTP_BODY_TIMEOUT_S,
        metadata=_option(
            "seconds a client may leave a request body half-sent without sending more; "
            "longer: 408 and the connection is closed"
        ),
    )
    http_keep_alive_timeout: float = dataclasses.field(
        default=DEFAULT_HTTP_KEEP_ALIVE_S,
        metadata=_option("seconds an idle HTTP connection is kept open before it is closed"),
    )
    shared_memory: SharedMemoryMode = dataclasses.field(
        default=SharedMemoryMode.AUTO,
        metadata=_option(
            "system shared memory (Triton's extension: tensors passed in /dev/shm regions "
            "the client registers): auto turns it on when --host is a loopback address, "
            "system turns it on, off turns it off"
        ),
    )
    shared_memory_user: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=_option(
            "a user (name or uid) whose /dev/shm objects clients may register as regions, "
            "besides the server's own user (repeat for more); objects of any other owner "
            "are refused, so a client cannot map another user's private object",
            metavar="USER",
        ),
    )
    shared_memory_group: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=_option(
            "a group (name or gid) whose /dev/shm objects clients may register as regions "
            "(repeat for more)",
            metavar="GROUP",
        ),
    )
    trace_config: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=_option(
            "request tracing, as Triton's --trace-config (repeat): rate=N, level=TIMESTAMPS, "
            "count=N, mode=triton|opentelemetry, triton,file=PATH, triton,log-frequency=N, "
            "opentelemetry,url=OTLP_ENDPOINT (see docs/tracing.md); off by default",
            metavar="[MODE,]SETTING=VALUE",
        ),
    )

    # -- logging (the start values of the logging extension's settings, docs/logging.md) --
    log_verbose: int = dataclasses.field(
        default=0,
        metadata=_option(
            "as Triton's --log-verbose: 0 logs no debug lines, 1 or more logs them too",
            metavar="N",
        ),
    )
    log_info: bool = dataclasses.field(default=True, metadata=_option("log INFO lines"))
    log_warning: bool = dataclasses.field(default=True, metadata=_option("log WARNING lines"))
    log_error: bool = dataclasses.field(default=True, metadata=_option("log ERROR lines"))
    log_format: LogFormat = dataclasses.field(
        default=LogFormat.DEFAULT,
        metadata=_option(
            "default: 'LEVEL logger: message'; ISO8601: the same after an ISO 8601 UTC time; "
            "json: one JSON object per line (time, level, logger, message and extra fields)"
        ),
    )
    log_file: str | None = dataclasses.field(
        default=None,
        metadata=_option(
            "append the server's log lines to this file instead of standard error (only "
            "here: the logging extension does not let clients change it)"
        ),
    )
    access_log: bool = dataclasses.field(
        default=False,
        metadata=_option(
            "log one line per HTTP request and gRPC call (method, route, model, status, "
            "latency, request id) on the conveyor.access logger"
        ),
    )

    def __post_init__(self) -> None:
        # A plain string (as from the command line or a caller) becomes the enum member.
        self._as_member("model_control", ModelControl)
        self._as_member("shared_memory", SharedMemoryMode)
        self._as_member("grpc_transport", GrpcTransport)
        self._as_member("log_format", LogFormat)
        if self.log_verbose < 0:
            raise ValueError(f"log_verbose must be >= 0, got {self.log_verbose}")
        for name in ("http_port", "grpc_port", "metrics_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ValueError(f"{name} must be 0..65535, got {port}")
        if self.workers < 0:
            raise ValueError(f"workers must be 0 (one per core) or more, got {self.workers}")
        if self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be at least 1")
        if self.grpc_max_message_bytes < 1:
            raise ValueError("grpc_max_message_bytes must be at least 1")
        if self.backlog < 1:
            raise ValueError(f"backlog must be at least 1, got {self.backlog}")
        if self.grpc_max_concurrent_streams < 1:
            raise ValueError("grpc_max_concurrent_streams must be at least 1")
        if self.grpc_max_header_list_bytes < 1024:
            raise ValueError("grpc_max_header_list_bytes must be at least 1024")
        for name in (
            "grpc_handshake_timeout", "grpc_idle_timeout", "grpc_send_timeout",
            "stream_send_timeout",
        ):  # fmt: skip
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 seconds (0: no limit)")
        if self.drain_timeout < 0:
            raise ValueError("drain_timeout must be >= 0")
        if self.load_model and self.model_control is not ModelControl.EXPLICIT:
            raise ValueError("--load-model needs --model-control explicit")
        if self.repository_poll_secs is not None:
            if self.model_control is not ModelControl.POLL:
                raise ValueError("--repository-poll-secs needs --model-control poll")
            if not self.repository_poll_secs > 0:
                # Triton polls only with a positive interval; 0 would silently never poll.
                raise ValueError(
                    "--repository-poll-secs must be > 0 seconds with --model-control poll, "
                    f"got {self.repository_poll_secs:g}"
                )
        for name in ("http_header_timeout", "http_body_timeout", "http_keep_alive_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds")
        if self.auth_token is not None and not _valid_token(self.auth_token):
            raise ValueError(
                "the auth token must be 1-4096 visible ASCII characters (no spaces), as an "
                "HTTP header value can carry"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together; give both or neither")
        if self.repository is not None and not os.path.isdir(self.repository):
            # Checked here, before any port is opened or "listening" logged.
            problem = "is not a directory" if os.path.exists(self.repository) else "does not exist"
            raise ValueError(
                f"model repository {self.repository!r} {problem} (the repository argument: a "
                "directory of <model>/<version>/ folders; leave it out for the built-in examples)"
            )
        if self.repository is not None:
            try:  # a model or version folder given for the repository, before any port opens
                check_root(Path(self.repository))
            except RepositoryError as exc:
                raise ValueError(exc.message) from None
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise ValueError(f"--{name.replace('_', '-')} {path!r} is not a file")
        self.tracing()  # a bad --trace-config is refused here, naming the entry
        self.shared_memory_owners()  # an unknown user or group is refused here

    def _as_member(self, name: str, kind: type[enum.Enum]) -> None:
        """Field ``name`` as a member of ``kind``; ValueError naming the choices if it is none."""
        value = getattr(self, name)
        try:
            object.__setattr__(self, name, kind(value))
        except ValueError:
            choices = ", ".join(str(member.value) for member in kind)
            raise ValueError(f"{name} must be one of {choices}, got {value!r}") from None

    @property
    def poll_interval(self) -> float:
        """Seconds between repository scans in poll mode (Triton's default if not given)."""
        if self.repository_poll_secs is None:
            return DEFAULT_REPOSITORY_POLL_S
        return self.repository_poll_secs

    def shared_memory_off(self) -> str | None:
        """None when system shared memory is on; otherwise why it is off (for errors)."""
        if self.shared_memory is SharedMemoryMode.SYSTEM:
            return None
        if self.shared_memory is SharedMemoryMode.OFF:
            return "it was started with --shared-memory off"
        if is_loopback(self.host):
            return None
        return (
            f"it listens on {self.host}, not only on loopback, so its clients may be on "
            "other machines; start it with --shared-memory system to turn it on"
        )

    def shared_memory_owners(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(uids, gids) of --shared-memory-user/-group (ValueError for an unknown name)."""
        uids = tuple(_account_id(name, "user") for name in self.shared_memory_user)
        gids = tuple(_account_id(name, "group") for name in self.shared_memory_group)
        return uids, gids

    def log_settings(self) -> LogSettings:
        """The logging extension's settings this server starts with."""
        return LogSettings(
            log_file=self.log_file or "",
            log_info=self.log_info,
            log_warning=self.log_warning,
            log_error=self.log_error,
            log_verbose_level=self.log_verbose,
            log_format=self.log_format,
            access_log=self.access_log,
        )

    def with_log_level(self, level: str) -> Settings:
        """These settings with ``--log-level`` folded in (debug: verbose; warning: no INFO
        lines; error: no INFO or WARNING lines), for the flag all commands share."""
        level = level.lower()
        if level == "debug":
            return dataclasses.replace(self, log_verbose=max(self.log_verbose, 1))
        if level == "warning":
            return dataclasses.replace(self, log_info=False)
        if level in ("error", "critical"):
            return dataclasses.replace(self, log_info=False, log_warning=False)
        return self

    def tracing(self) -> TraceConfig:
        """The trace settings ``--trace-config`` gives (ValueError for a bad entry)."""
        return parse_trace_config(self.trace_config)

    def grpc_limits(self) -> h2_limits.Limits:
        """What one gRPC connection may cost (both transports take these)."""
        return h2_limits.Limits(
            max_concurrent_streams=self.grpc_max_concurrent_streams,
            max_header_list_bytes=self.grpc_max_header_list_bytes,
            handshake_timeout=self.grpc_handshake_timeout,
            idle_timeout=self.grpc_idle_timeout,
            send_timeout=self.grpc_send_timeout,
        )

    def with_environment(self, environ: Mapping[str, str]) -> Settings:
        """These settings with the token from ``$CONVEYOR_AUTH_TOKEN`` when none was given."""
        token = environ.get(AUTH_TOKEN_ENV)
        if self.auth_token is None and token:
            return dataclasses.replace(self, auth_token=token)
        return self


def _account_id(name: str, kind: str) -> int:
    """A user's uid or a group's gid from its name or number (ValueError if unknown)."""
    if name.isdigit():
        return int(name)
    import grp  # POSIX only, as /dev/shm is: imported where used
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid if kind == "user" else grp.getgrnam(name).gr_gid
    except KeyError:
        option = f"--shared-memory-{kind}"
        raise ValueError(f"{option} {name!r}: no such {kind} on this machine") from None


def _valid_token(token: str) -> bool:
    return 0 < len(token) <= 4096 and all(0x21 <= ord(c) <= 0x7E for c in token)


def add_arguments(parser: argparse.ArgumentParser, cls: type = Settings) -> None:
    """Add one command-line option per field of ``cls`` (a dataclass)."""
    options.add_arguments(parser, cls)


def from_arguments(args: argparse.Namespace, cls: type = Settings) -> Any:
    """The dataclass ``cls`` from parsed options; fields not given keep their defaults."""
    return options.from_arguments(args, cls)
