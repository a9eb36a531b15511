"""deploy/Containerfile: its entrypoint is the CLI's own ``conveyor serve``.

No container engine runs on the test machine, so the image is not built here; this reads
the instructions it is built from.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from conveyor.cli import build_parser
from conveyor.server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def instructions() -> dict[str, list[str]]:
    """Each instruction's arguments, by keyword (the last one of each wins, as in a build)."""
    found: dict[str, list[str]] = {}
    for line in CONTAINERFILE.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, rest = line.strip().partition(" ")
        found[keyword.upper()] = json.loads(rest) if rest.startswith("[") else rest.split()
    return found


def test_entrypoint_is_the_clis_serve_command() -> None:
    entrypoint = instructions()["ENTRYPOINT"]
    assert entrypoint == ["conveyor", "serve"]
    with open(ROOT / "pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts[entrypoint[0]] == "conveyor.cli:main"  # the command pip installs
    default = build_parser().parse_args([*entrypoint[1:], *instructions()["CMD"]])
    assert default.command == "serve"
    assert (default.host, default.repository) == ("0.0.0.0", "/models")


def test_copied_sources_exist_and_ports_are_the_servers() -> None:
    steps = instructions()
    copied = [
        line.split()[1:-1]
        for line in CONTAINERFILE.read_text().splitlines()
        if line.startswith("COPY ")
    ]
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), source
    ports = Settings()  # the defaults conveyor serve listens on
    assert steps["EXPOSE"] == [str(ports.http_port), str(ports.grpc_port), str(ports.metrics_port)]
