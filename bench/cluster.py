"""Study throughput on Ray against the local backend: runs per minute of one grid, and Ray's start-up cost.

A benchmark, not a test: it prints figures and asserts nothing. Every Ray process
runs inside network namespaces this script creates and removes (root only, like
the tests), so Ray binds nothing outside them. Arms, each the same grid (the one
bench/study.py uses) with one torch thread per run, from a fresh study folder:

- local: the local backend, 2 workers (the reference: ratios are against it);
- Ray, 1 node: ``--backend ray`` starting its own local instance (2 CPUs);
- Ray, 2 nodes: a head and a worker node, 1 CPU each, in two namespaces joined by
  a veth pair, the driver on the head (``--address``).

On one 2-core machine the two "nodes" share the same cores, so the 2-node figure
measures what distribution costs, not what it gains; on real machines each node
brings its own cores.

    sudo python bench/cluster.py [--steps 100] [--seeds 4]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from netns import Netns, link, unavailable  # noqa: E402
from study import GRID  # noqa: E402  (bench/study.py's grid)

RAY = str(Path(sys.executable).with_name("ray"))
NODE = ["--num-cpus", "1", "--object-store-memory", str(200 * 2**20), "--disable-usage-stats"]


def study_seconds(argv: list[str], ns: Netns | None, env: dict[str, str], cwd: Path) -> tuple[int, float, float]:
    """(runs, seconds the study reports, wall seconds of the whole command) for one ``pelab study``."""
    cmd = [sys.executable, "-m", "pelab", "study", *argv, "--no-report"]
    start = time.perf_counter()
    r = subprocess.run(ns.command(*cmd) if ns else cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"pelab study failed:\n{r.stdout}\n{r.stderr}")
    m = re.search(r"(\d+) run\(s\) in ([\d.]+)s", r.stdout)
    if not m:
        raise SystemExit(f"no summary line in:\n{r.stdout}")
    return int(m.group(1)), float(m.group(2)), wall


def ray_init_seconds(ns: Netns, env: dict[str, str]) -> tuple[float, float]:
    """(ray.init of a local instance, first task that imports pelab's trainer) inside ``ns``."""
    code = (
        "import time; t0 = time.perf_counter(); import ray; "
        "ray.init(address='local', include_dashboard=False, log_to_driver=False, logging_level=40); "
        "t1 = time.perf_counter(); f = ray.remote(lambda: __import__('pelab.train').__name__); "
        "ray.get(f.remote()); t2 = time.perf_counter(); print(t1 - t0, t2 - t1); ray.shutdown()"
    )
    out = ns.run(sys.executable, "-c", code, env=env).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=4)
    args = ap.parse_args()
    why = unavailable()
    if why:
        raise SystemExit(f"bench/cluster.py {why}")
    import ray
    import torch

    work = Path(tempfile.mkdtemp(prefix="plb"))
    env = dict(
        os.environ,
        RAY_TMPDIR=str(work),
        RAY_USAGE_STATS_ENABLED="0",
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(16),
    )
    grid = work / "grid.toml"
    grid.write_text(GRID.format(steps=args.steps, seeds=list(range(args.seeds))))
    print(f"cores: {os.cpu_count()}, torch {torch.__version__}, ray {ray.__version__}")
    print(f"grid: 4 arms x {args.seeds} seeds, reverse n=12, d=32, {args.steps} steps each, 1 thread per run")
    try:
        results = []
        runs, secs, wall = study_seconds(
            [str(grid), "--out", str(work / "local"), "--workers", "2", "--threads", "1"], None, env, work
        )
        results.append(("local, 2 workers", runs, secs, wall))
        with Netns("bench1") as ns:
            init_s, first_task_s = ray_init_seconds(ns, env)
            runs, secs, wall = study_seconds(
                [str(grid), "--out", str(work / "ray1"), "--backend", "ray"], ns, env, work
            )
            results.append(("Ray, 1 node x 2 CPUs (own instance)", runs, secs, wall))
        with Netns("head") as head, Netns("worker") as worker:
            link(head, worker, "10.79.0.1", "10.79.0.2")
            t0 = time.perf_counter()
            head.run(RAY, "start", "--head", "--node-ip-address", "10.79.0.1", "--port", "6382",
                     "--include-dashboard=false", *NODE, env=env)  # fmt: skip
            t1 = time.perf_counter()
            worker.run(RAY, "start", "--address", "10.79.0.1:6382", "--node-ip-address", "10.79.0.2", *NODE,
                       env=env)  # fmt: skip
            t2 = time.perf_counter()
            runs, secs, wall = study_seconds(
                [str(grid), "--out", str(work / "ray2"), "--backend", "ray", "--address", "10.79.0.1:6382"],
                head,
                env,
                work,
            )
            results.append(("Ray, 2 nodes x 1 CPU (veth)", runs, secs, wall))
        print("\nruns per minute (study time as `pelab study` reports it; wall includes Python start-up):")
        base = 60 * results[0][1] / results[0][2]
        for name, runs, secs, wall in results:
            rpm = 60 * runs / secs
            print(f"  {name:38s} {runs} runs in {secs:4.0f}s (wall {wall:4.0f}s) = {rpm:5.1f} runs/min", end="")
            print(f" (x{rpm / base:.2f})")
        print("\nRay start-up overhead:")
        print(f"  ray.init() of a local instance         {init_s:5.1f}s")
        print(f"  first task (worker start, import)      {first_task_s:5.1f}s")
        print(f"  `ray start --head`                      {t1 - t0:5.1f}s")
        print(f"  `ray start --address` (worker joins)    {t2 - t1:5.1f}s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
