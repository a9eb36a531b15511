"""``python -m conveyor.examples.minilm install [--dir DIR] [--force]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from conveyor.examples.minilm.install import install, installed
from conveyor.examples.minilm.paths import ENV_VAR, weights_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conveyor.examples.minilm",
        description="Install all-MiniLM-L6-v2's weights for the built-in `minilm` model.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("install", help="download the weights and build the encoder")
    command.add_argument(
        "--dir", type=Path, default=None, help=f"target folder (default: ${ENV_VAR} or the cache)"
    )
    command.add_argument("--force", action="store_true", help="download and build again")
    commands.add_parser("where", help="print the folder the weights are read from")
    args = parser.parse_args(argv)
    if args.command == "where":
        print(weights_dir())
        return 0
    target = args.dir or weights_dir()
    there = installed(target) and not args.force
    install(target, force=args.force)  # also builds the encoder's graph if it is missing
    if there:
        print(f"all-MiniLM-L6-v2 is already in {target} (--force fetches it again)")
    else:
        print(f"all-MiniLM-L6-v2 installed in {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
