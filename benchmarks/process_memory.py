"""Memory of process instances: is a python model's weights array held once, or per worker?

Serves a python model whose ``load()`` makes ``--megabytes`` of numpy weights, in several
configurations, each in a fresh process, and sums the proportional set size (PSS, from
/proc/<pid>/smaps_rollup) of the serving process and every process below it. PSS divides
each shared page between the processes that map it, so the sum is what the machine really
spends. "per-worker copies" builds the weights in each worker instead (on its first
request), which is what one loaded copy per worker process costs.

    python -m benchmarks.process_memory                 # table
    python -m benchmarks.process_memory --json --configs process-1,process-4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

MODEL = textwrap.dedent(
    """
    import os
    import time
    import numpy as np


    class Model:
        def load(self, config):
            self.megabytes = int(config.backend_options["megabytes"])
            self.weights = None
            if not config.backend_options.get("per_worker", False):
                self.weights = self.make()

        def make(self):
            return np.full(self.megabytes * 2**20 // 8, 0.5)  # every page written: resident

        def infer(self, inputs):
            if self.weights is None:  # per_worker: each worker process builds its own copy
                self.weights = self.make()
            time.sleep(0.02)  # long enough that every instance takes some of the requests
            total = float(self.weights[::512].sum())  # reads a value on every page
            return {"OUTPUT0": np.array([total], np.float64), "PID": np.array([os.getpid()])}
    """
)

CONFIG = """
backend = "python"
instances = {instances}
instance_kind = "{kind}"

[python]
megabytes = {megabytes}
per_worker = {per_worker}

[[inputs]]
name = "INPUT0"
datatype = "FP32"
shape = [1]

[[outputs]]
name = "OUTPUT0"
datatype = "FP64"
shape = [1]

[[outputs]]
name = "PID"
datatype = "INT64"
shape = [1]
"""

# name -> (instance kind, instances, weights built per worker)
CONFIGS = {
    "thread-1": ("thread", 1, False),
    "thread-4": ("thread", 4, False),
    "process-1": ("process", 1, False),
    "process-4": ("process", 4, False),
    "process-4-per-worker-copies": ("process", 4, True),
}

MEASURE = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np, psutil
    from conveyor import Engine, as_completed

    repo, instances = sys.argv[1], int(sys.argv[2])
    with Engine.from_repository(repo) as engine:
        pids = set()
        for _ in range(20):  # until every instance has run (and so built what it builds)
            futures = [engine.submit("weights", {"INPUT0": np.zeros(1, np.float32)})
                       for _ in range(4 * instances)]
            pids |= {int(f.result(60)["PID"][0]) for f in as_completed(futures, timeout=120)}
            if len(pids) >= instances or engine.model("weights").config.instance_kind == "thread":
                break
        procs = [psutil.Process()] + psutil.Process().children(recursive=True)
        pss = rss = 0
        for proc in procs:
            fields = {}
            with open(f"/proc/{proc.pid}/smaps_rollup") as f:
                for line in f:  # "Pss:   123456 kB"; the first line is the address range
                    key, _, value = line.partition(":")
                    if value.strip().endswith("kB"):
                        fields[key] = int(value.split()[0]) * 1024
            pss += fields["Pss"]
            rss += fields["Rss"]
        print(json.dumps({"pss": pss, "rss": rss, "processes": len(procs),
                          "workers_seen": len(pids)}))
    """
)


def measure(name: str, megabytes: int, root: Path) -> dict[str, int]:
    kind, instances, per_worker = CONFIGS[name]
    repo = root / name
    folder = repo / "weights" / "1"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(MODEL)
    (repo / "weights" / "config.toml").write_text(
        CONFIG.format(
            kind=kind,
            instances=instances,
            megabytes=megabytes,
            per_worker=str(per_worker).lower(),
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(repo), str(instances)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    names = [name.strip() for name in args.configs.split(",") if name.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: measure(name, args.megabytes, Path(tmp)) for name in names}
    if args.json:
        print(json.dumps({"megabytes": args.megabytes, "results": results}))
        return
    base = results.get("process-1")
    mib = 2**20
    print(f"python model with {args.megabytes} MiB of numpy weights; sums over all processes")
    header = ("configuration", "processes", "PSS MiB", "RSS MiB", "PSS/process-1")
    print(f"{header[0]:<30} {header[1]:>9} {header[2]:>9} {header[3]:>9} {header[4]:>15}")
    for name, r in results.items():
        ratio = f"{r['pss'] / base['pss']:.2f}x" if base else "-"
        print(
            f"{name:<30} {r['processes']:>9} {r['pss'] / mib:>9.0f} {r['rss'] / mib:>9.0f} "
            f"{ratio:>15}"
        )


if __name__ == "__main__":
    main()
