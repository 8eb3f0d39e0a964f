"""What gitrag's hooks cost a commit, and what the daemon costs in memory.

    python bench/bench_hooks.py [--commits 40] [--files 300] [--embedder hash|local|ollama]

1. Commit latency, side by side in one run: three identical repositories, one plain, one
   with ``gitrag install --no-systemd`` (hooks + a running daemon), and one with the same
   install minus the reference-transaction hook (the hook set before it); commits rotate
   between them (same machine state for all) and each ``git commit`` is timed as a
   whole process. Goal: under 10 ms added at the median. Also the post-commit script
   run by itself, against an empty shell script (what the hook costs with no git noise),
   and ``git tag`` (a ref that is no local branch: reference-transaction's shell alone,
   no Python) with and without the hooks.
2. The daemon's RSS (VmRSS, MB): idle after start, idle after the first index, and the
   peak while it indexes ``--files`` generated Python files (sampled every 20 ms).

Everything lives in a temporary GITRAG_HOME; the daemon is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

ENV = {"GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@e.invalid", "GIT_COMMITTER_NAME": "B",
       "GIT_COMMITTER_EMAIL": "b@e.invalid", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **ENV}).stdout.strip()


def gitrag(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "gitrag", *args], check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: int) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(files):
        body = "\n".join(f"def func_{i}_{j}(x):\n    return x * {j} + {i}\n" for j in range(8))
        (path / f"mod_{i:04d}.py").write_text(f'"""Module {i}."""\n\n{body}')
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def timed_commit(repo: Path, n: int) -> float:
    (repo / f"change_{n}.py").write_text(f"def change_{n}():\n    return {n}\n")
    git(repo, "add", "-A")
    t0 = time.perf_counter()
    subprocess.run(["git", "commit", "-q", "-m", f"c{n}"], cwd=repo, check=True, env={**os.environ, **ENV})
    return (time.perf_counter() - t0) * 1000


def timed_run(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, env={**os.environ, **ENV})
    return (time.perf_counter() - t0) * 1000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_during(pid: int, work: threading.Thread) -> float:
    peak = 0.0
    work.start()
    while work.is_alive():
        peak = max(peak, rss_mb(pid))
        time.sleep(0.02)
    return max(peak, rss_mb(pid))


def wait_indexed(repo: Path, deadline_s: float = 600.0) -> None:
    from gitrag.daemon import client

    head = git(repo, "rev-parse", "HEAD")
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        branches = client.request("status", repo=str(repo))["repos"][0]["branches"]
        if any(b["current"] and b["indexed_commit"] == head for b in branches):
            return
        time.sleep(0.05)
    raise SystemExit(f"{repo} was not indexed within {deadline_s:g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40, help="commits per repository")
    parser.add_argument("--files", type=int, default=300, help="files in the repository the daemon indexes")
    parser.add_argument("--embedder", default=os.environ.get("GITRAG_EMBEDDER", "hash"))
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between two measured git commands")
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gitrag-bench-hooks-"))
    os.environ.update(GITRAG_HOME=str(tmp / "home"), GITRAG_EMBEDDER=opts.embedder, HOME=str(tmp))
    from gitrag.daemon import client, launch

    plain, hooked, older = make_repo(tmp / "plain", 20), make_repo(tmp / "hooked", 20), make_repo(tmp / "older", 20)
    big = make_repo(tmp / "big", opts.files)
    pid = launch.spawn()
    try:
        time.sleep(1.0)  # settle after start-up (not measured as a result)
        idle_start = rss_mb(pid)
        gitrag("install", "--no-systemd", "--repo", str(hooked))
        gitrag("install", "--no-systemd", "--repo", str(older))
        (older / ".git" / "hooks" / "reference-transaction").unlink()  # the hook set before it
        idle_indexed = rss_mb(pid)
        for i in range(3):  # warm all (page cache, git's own start-up)
            for repo in (plain, hooked, older):
                timed_commit(repo, 1000 + i)
        plain_ms, hooked_ms, older_ms = [], [], []
        tag_plain, tag_hooked = [], []
        rng = random.Random(0)
        for i in range(opts.commits):
            ops = [(plain_ms, partial(timed_commit, plain, i)), (hooked_ms, partial(timed_commit, hooked, i)),
                   (older_ms, partial(timed_commit, older, i)),
                   (tag_plain, partial(timed_run, ["git", "tag", f"t{i}"], plain)),
                   (tag_hooked, partial(timed_run, ["git", "tag", f"t{i}"], hooked))]
            rng.shuffle(ops)  # no configuration always runs right after another's notifier
            for into, op in ops:
                into.append(op())
                # commits are seconds apart in life: let the notifier and the daemon's sync
                # (after its 0.5 s debounce) finish before the next measurement
                time.sleep(opts.pause)
        bare_ms, hook_ms = [], []  # the post-commit script alone, against an empty sh script
        noop = tmp / "noop.sh"
        noop.write_text("#!/bin/sh\nexit 0\n")
        noop.chmod(0o755)
        for _ in range(opts.commits):
            bare_ms.append(timed_run([str(noop)], hooked))
            hook_ms.append(timed_run([str(hooked / ".git" / "hooks" / "post-commit")], hooked))
            time.sleep(0.1)
        wait_indexed(hooked)
        work = threading.Thread(target=gitrag, args=("install", "--no-systemd", "--repo", str(big)))
        t0 = time.perf_counter()
        peak = peak_rss_during(pid, work)
        index_s = time.perf_counter() - t0
        after = rss_mb(pid)
    finally:
        client.request("stop", timeout=5.0)
    med_p, med_h = statistics.median(plain_ms), statistics.median(hooked_ms)

    def p90(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=10)[-1]

    print(f"commit latency over {opts.commits} commits each (ms)       median    p90")
    print(f"  without hooks                                   {med_p:7.1f} {p90(plain_ms):6.1f}")
    print(f"  with gitrag hooks + daemon                      {med_h:7.1f} {p90(hooked_ms):6.1f}")
    print(f"  with the hooks before reference-transaction     {statistics.median(older_ms):7.1f} {p90(older_ms):6.1f}")
    print(f"  added by gitrag                                 {med_h - med_p:7.1f}   (goal < 10)")
    print(f"  added by gitrag before reference-transaction    {statistics.median(older_ms) - med_p:7.1f}")
    print("git tag (no Python: not a local branch)          median    p90")
    print(f"  without hooks                                   {statistics.median(tag_plain):7.1f} {p90(tag_plain):6.1f}")
    print(f"  with gitrag hooks                               {statistics.median(tag_hooked):7.1f} {p90(tag_hooked):6.1f}")
    script_ms = statistics.median(hook_ms) - statistics.median(bare_ms)
    print(f"  post-commit script alone, minus an empty script {script_ms:7.1f}")
    print(f"daemon RSS (MB), embedder {opts.embedder}")
    print(f"  idle after start                                {idle_start:7.1f}")
    print(f"  idle after indexing a small repository          {idle_indexed:7.1f}")
    print(f"  peak while indexing {opts.files} files ({index_s:.1f} s)        {peak:7.1f}")
    print(f"  after that index                                {after:7.1f}")


if __name__ == "__main__":
    main()
