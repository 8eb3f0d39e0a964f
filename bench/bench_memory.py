"""Daemon memory: peak RSS while it indexes a large corpus, idle RSS after, and idle RSS
after many successive syncs of different commits (does it come back down?).

    python bench/bench_memory.py --corpus DIR [--embedder static] [--commits 20] [--files-per-commit 5]
        [--branch-per-commit] [--tree DIR ...]

Copies the corpus (e.g. the standard library corpus of bench/eval/make_stdlib_corpus.sh)
to a temporary folder, starts a real ``gitrag daemon`` with its own GITRAG_HOME and runs
``gitrag index`` (routed through the daemon). The daemon's VmRSS is sampled from
/proc every 0.1 s; VmHWM gives the peak. "idle" is VmRSS 3 s after a sync returned.
Then ``--commits`` times: modify ``--files-per-commit`` .py files (a line appended to
each, different files each time), commit (on a new branch each time with
``--branch-per-commit``), and sync through the daemon again; prints the idle RSS after
each sync and its ratio to the idle RSS after the first index.

``--tree DIR`` (repeatable) measures the gitrag of another checkout (e.g. ``git archive
main | tar -x -C /tmp/before``), one after the other in this run, each on a fresh copy of
the corpus with its own home; the table at the end puts them side by side (default: this
checkout only).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]


def proc_status(pid: int, key: str) -> float:
    """A /proc/PID/status field (VmRSS, VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def gitrag(env: dict[str, str], *args: str) -> float:
    """Run the CLI to the end; returns its wall seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gitrag", *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def idle_rss(pid: int, settle_s: float = 3.0) -> float:
    time.sleep(settle_s)
    return proc_status(pid, "VmRSS")


def split(pid: int) -> str:
    """RSS as anonymous (heap) + file-backed (the store's memory-mapped segments, reclaimable)."""
    return f"anon {proc_status(pid, 'RssAnon'):.0f} + file {proc_status(pid, 'RssFile'):.0f} MiB"


def measure(tree: Path, args: argparse.Namespace) -> dict[str, object]:
    """One daemon of the gitrag in ``tree`` through the whole scenario; its figures (MiB, s)."""
    work = Path(tempfile.mkdtemp(prefix="gitrag-mem-"))
    repo = work / "corpus"
    shutil.copytree(args.corpus, repo, symlinks=True)
    env = {**os.environ, "GITRAG_HOME": str(work / "home"), "GITRAG_EMBEDDER": args.embedder,
           "PYTHONPATH": str(tree)}
    log = (work / "daemon.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon", "--debounce", "0.2"], env=env,
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    out: dict[str, object] = {"tree": str(tree)}
    try:
        os.environ["GITRAG_HOME"] = env["GITRAG_HOME"]
        from gitrag.daemon import client

        deadline = time.time() + 60
        while not client.probe(timeout=0.5)["running"]:
            if time.time() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the daemon did not start: {(work / 'daemon.log').read_text()[-2000:]}")
            time.sleep(0.2)
        start_rss = proc_status(daemon.pid, "VmRSS")
        samples: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append(proc_status(daemon.pid, "VmRSS"))
                stop.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        first_s = gitrag(env, "index", "--repo", str(repo))
        stop.set()
        sampler.join()
        peak = max(proc_status(daemon.pid, "VmHWM"), max(samples, default=0.0))
        first_idle = idle_rss(daemon.pid)
        out.update(start=start_rss, first_s=first_s, peak=peak, first_idle=first_idle, first_split=split(daemon.pid))
        print(f"== {tree}")
        print(f"embedder {args.embedder}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}")
        print(f"daemon started:          {start_rss:7.0f} MiB")
        print(f"first index:             {first_s:7.1f} s (through the daemon)")
        print(f"peak RSS while indexing: {peak:7.0f} MiB")
        print(f"idle RSS after it:       {first_idle:7.0f} MiB  ({out['first_split']})", flush=True)

        tracked = sorted(subprocess.run(["git", "ls-files", "*.py"], cwd=repo, check=True, capture_output=True,
                                        text=True).stdout.split())
        step = max(1, len(tracked) // max(1, args.commits * args.files_per_commit))
        pick = iter(tracked[::step])
        rss: list[float] = []
        seconds: list[float] = []
        for n in range(1, args.commits + 1):
            if args.branch_per_commit:
                subprocess.run([*GIT, "checkout", "-q", "-b", f"bench-{n}"], cwd=repo, check=True)
            for _ in range(args.files_per_commit):
                path = repo / next(pick)
                with path.open("a", encoding="utf-8") as fh:
                    fh.write(f"\n\ndef _bench_change_{n}():\n    return {n}\n")
            subprocess.run([*GIT, "commit", "-q", "-am", f"bench: change {n}"], cwd=repo, check=True)
            seconds.append(gitrag(env, "index", "--repo", str(repo)))
            rss.append(idle_rss(daemon.pid))
            print(f"sync {n:2d}: {seconds[-1]:6.2f} s  idle RSS {rss[-1]:6.0f} MiB  ({rss[-1] / first_idle:.2f}x the first; "
                  f"{split(daemon.pid)})", flush=True)
        out.update(rss=rss, seconds=seconds, last_split=split(daemon.pid), run_peak=proc_status(daemon.pid, "VmHWM"))
        if rss:
            print(f"idle RSS after {args.commits} syncs: {rss[-1]:.0f} MiB = {rss[-1] / first_idle:.2f}x the idle RSS "
                  f"after the first index; peak over the run {out['run_peak']:.0f} MiB", flush=True)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


def table(results: list[dict[str, object]]) -> None:
    """The runs side by side (Markdown)."""
    print("\n| | " + " | ".join(str(r["tree"]) for r in results) + " |")
    print("|---|" + "---|" * len(results))

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        print(f"| {label} | " + " | ".join(cell(r) for r in results) + " |")

    row("daemon started", lambda r: f"{r['start']:.0f} MiB")
    row("first index (through the daemon)", lambda r: f"{r['first_s']:.1f} s")
    row("peak RSS while indexing", lambda r: f"{r['peak']:.0f} MiB")
    row("idle RSS after the first index", lambda r: f"{r['first_idle']:.0f} MiB ({r['first_split']})")
    n = min(len(r.get("rss", [])) for r in results)
    for i in range(n):
        row(f"idle RSS after sync {i + 1}", lambda r, i=i: f"{r['rss'][i]:.0f} MiB ({r['rss'][i] / r['first_idle']:.2f}x)")
    if n:
        row(f"sync {n}: split", lambda r: str(r["last_split"]))
        row(f"sync {n} / first index idle", lambda r: f"{r['rss'][n - 1] / r['first_idle']:.2f}x")
        row("median sync", lambda r: f"{sorted(r['seconds'])[len(r['seconds']) // 2]:.2f} s")
        row("peak over the run", lambda r: f"{r['run_peak']:.0f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--embedder", default="static")
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--files-per-commit", type=int, default=5)
    ap.add_argument("--branch-per-commit", action="store_true")
    ap.add_argument("--tree", type=Path, action="append", help="a gitrag checkout to measure (repeatable)")
    args = ap.parse_args()
    results = [measure(tree.resolve(), args) for tree in (args.tree or [ROOT])]
    table(results)
    return 0




if __name__ == "__main__":
    raise SystemExit(main())
