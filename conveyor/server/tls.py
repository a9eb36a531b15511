"""TLS from a certificate and key file, for the HTTP and metrics front ends.

The files are read once at start; a wrong path or a key that does not match the
certificate fails the start with a message naming the file, before any port serves.
"""

from __future__ import annotations

import ssl


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server-side context: TLS 1.2 or newer, the library's default ciphers."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(
            f"cannot load TLS certificate {cert_file!r} / key {key_file!r}: {exc}"
        ) from None
    return context


def read_pair(cert_file: str, key_file: str) -> tuple[bytes, bytes]:
    """The certificate chain and key as PEM bytes (gRPC takes them in memory)."""
    # Validate them as Python's ssl would first, so both front ends fail alike.
    server_context(cert_file, key_file)
    with open(cert_file, "rb") as cert, open(key_file, "rb") as key:
        return cert.read(), key.read()
