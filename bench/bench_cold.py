"""Cold commands: ``gitrag ask`` (no daemon), ``gitrag doctor`` and ``gitrag --help`` as new processes.

    python bench/bench_cold.py --corpus DIR [--embedder static --embedder local] [--runs 5]

For each embedder: indexes the corpus once (own GITRAG_HOME, not timed), makes sure no
daemon runs, then runs ``gitrag ask QUESTION --no-answer``, ``gitrag doctor`` and ``gitrag --help`` ``--runs``
times each, side by side, and prints the median and max wall seconds and the median CPU
seconds (user + sys: what the command costs on an idle machine), plus the load average,
since a busy machine stretches wall time but not CPU time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(env: dict[str, str], *args: str) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -m gitrag ARGS`` run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gitrag", *args], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--embedder", action="append", default=[])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--question", default="how are command line options parsed")
    ap.add_argument("--home", action="append", default=[], help="NAME=DIR: reuse this GITRAG_HOME (a warm index)")
    args = ap.parse_args()
    homes = dict(h.split("=", 1) for h in args.home)
    work = Path(tempfile.mkdtemp(prefix="gitrag-cold-"))
    print(f"{'embedder':10} {'command':7} {'wall p50':>8} {'wall max':>8} {'CPU p50':>8}   load avg")
    for name in args.embedder or ["static"]:
        env = {**os.environ, "GITRAG_EMBEDDER": name, "GITRAG_HOME": homes.get(name, str(work / name)), "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(args.corpus)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        commands = {"ask": ["ask", args.question, "--no-answer", "--repo", str(args.corpus)],
                    "doctor": ["doctor", "--repo", str(args.corpus)],
                    "help": ["--help"]}  # the floor: interpreter, click and gitrag.surfaces.cli alone
        runs: dict[str, list[tuple[float, float]]] = {c: [] for c in commands}
        for _ in range(args.runs):
            for cmd, argv in commands.items():  # interleaved: both see the same machine
                runs[cmd].append(timed(env, *argv))
        for cmd, values in runs.items():
            walls, cpus = [w for w, _ in values], [c for _, c in values]
            print(f"{name:10} {cmd:7} {statistics.median(walls):8.2f} {max(walls):8.2f} {statistics.median(cpus):8.2f}"
                  f"   {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
