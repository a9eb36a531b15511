"""Models, certificates and raw-socket helpers for the reliability tests.

- ``tiny``: ONNX Add (+1) over FP32 [-1, 16].
- ``runs``: Python, 1 instance, a small queue; appends its TAG to ``runs.log`` and then
  sleeps INPUT0 seconds, so a test can prove which requests ran.
- ``sleep``: Python, sleeps INPUT0 seconds (``SLEEP_CONFIG`` sets instances and queue).
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import socket
import textwrap
import time
import urllib.request
from pathlib import Path

from conveyor.examples import onnx_models
from conveyor.testing import RunningServer
from tests.conftest import RUN_LOGGING_CONFIG as RUNS_CONFIG
from tests.conftest import RUN_LOGGING_MODEL as RUNS_MODEL

SLEEP_MODEL = """
import time

class Model:
    def infer(self, inputs):
        time.sleep(float(inputs["INPUT0"].ravel()[0]))
        return {"OUTPUT0": inputs["INPUT0"].copy()}
"""

SLEEP_CONFIG = """
backend = "python"
instances = {instances}
max_queue_size = {queue}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP32"
shape = [1]
"""


def python_model(root: Path, name: str, source: str, config: str) -> Path:
    folder = root / name / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(textwrap.dedent(source))
    (root / name / "config.toml").write_text(textwrap.dedent(config))
    return root / name


def build_repository(root: Path, *, runs_queue: int = 4) -> Path:
    onnx_models.tiny(root / "tiny" / "1" / "model.onnx")
    python_model(root, "runs", RUNS_MODEL, RUNS_CONFIG.format(queue=runs_queue))
    return root


def run_log(root: Path, model: str = "runs") -> list[str]:
    path = root / model / "1" / "runs.log"
    return path.read_bytes().decode().split() if path.exists() else []


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key, made here (cryptography)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def raw_exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (or resets) the connection."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def metric(server: RunningServer, name: str, model: str, headers: dict | None = None) -> float:
    request = urllib.request.Request(server.metrics_url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf'^{name}\{{[^}}]*model="{model}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def wait_until(condition, timeout: float = 20.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout} s")
        time.sleep(0.02)
