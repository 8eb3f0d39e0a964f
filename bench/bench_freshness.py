"""How fresh is an answer after a git command that moves a ref? (issue 22)

    python bench/bench_freshness.py [--files 140] [--rounds 5] [--embedder hash]

A real repository (the first ``--files`` modules of the Python standard library, from
bench/eval/make_stdlib_corpus.sh: about 5,000 chunks at the default), ``gitrag install
--no-systemd`` (real hooks, a real daemon). For each git command below, ``--rounds``
times: a commit adds a function with a unique name, the daemon indexes it; then the
command runs, and from the moment it returns the benchmark asks the daemon (the socket
request ``gitrag ask`` makes) until an answer comes from the commit the branch now points
to. Reported per command: the time to that first matching answer (p50, p95, max), and the
answers that served the deleted or renamed function while saying the index is current
(``up_to_date`` true, no ``catching_up``): the "stale without a note" count, goal 0.

    reset --hard    reset the branch back past the function's commit (no post-* hook fires)
    branch -f       a branch not checked out moved back (measured on that branch's index)
    update-ref      the checked-out branch moved back by plumbing
    filter-branch   the function's file removed from history
    checkout -b     a new branch and a commit on it, asked at once
    amend           the function renamed in an amended commit
    rebase          a topic branch with the function rebased onto a new main commit (renamed)

Everything lives in a temporary GITRAG_HOME; the daemon is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ENV = {"GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@e.invalid", "GIT_COMMITTER_NAME": "B",
       "GIT_COMMITTER_EMAIL": "b@e.invalid", "GIT_CONFIG_NOSYSTEM": "1", "FILTER_BRANCH_SQUELCH_WARNING": "1"}
DEADLINE_S = 60.0


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **ENV}).stdout.strip()


def make_corpus(dest: Path, files: int) -> None:
    subprocess.run(["sh", str(HERE / "eval" / "make_stdlib_corpus.sh"), str(dest)], check=True, capture_output=True)
    tracked = git(dest, "ls-files").splitlines()
    drop = tracked[files:]
    for start in range(0, len(drop), 500):
        git(dest, "rm", "-q", "--cached", "--", *drop[start:start + 500])
    git(dest, "commit", "-q", "--amend", "-m", f"the first {files} modules of the standard library")
    git(dest, "clean", "-qfdx")
    git(dest, "branch", "-M", "main")


def ask(repo: Path, question: str) -> dict[str, Any]:
    from gitrag.daemon import client

    return client.request("ask", timeout=120.0, repo=str(repo), question=question, k=10, no_answer=True)


def index_of(repo: Path, branch: str) -> str | None:
    from gitrag.daemon import client

    data = client.request("status", timeout=30.0, repo=str(repo))
    return next((b["indexed_commit"] for b in data["repos"][0]["branches"] if b["name"] == branch), None)


def wait_branch(repo: Path, branch: str, commit: str) -> float:
    t0 = time.perf_counter()
    while index_of(repo, branch) != commit:
        if time.perf_counter() - t0 > DEADLINE_S:
            raise SystemExit(f"{branch} not indexed at {commit[:8]} within {DEADLINE_S:g} s")
        time.sleep(0.02)
    return time.perf_counter() - t0


def add_function(repo: Path, name: str, commit: bool = True) -> str:
    (repo / "bench_fresh").mkdir(exist_ok=True)
    (repo / "bench_fresh" / f"{name}.py").write_text(f"def {name}(value):\n    return value + {len(name)}\n")
    git(repo, "add", "-A")
    if commit:
        git(repo, "commit", "-q", "-m", f"add {name}")
    return git(repo, "rev-parse", "HEAD")


class Result:
    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.stale_unflagged = 0
        self.answers = 0


def until_head(repo: Path, question: str, gone: str | None, result: Result) -> None:
    """Ask from now until an answer comes from HEAD; count answers that serve ``gone`` (a
    function no longer at HEAD) while saying they are current."""
    head = git(repo, "rev-parse", "HEAD")
    t0 = time.perf_counter()
    while True:
        data = ask(repo, question)
        result.answers += 1
        served = gone is not None and any(r.get("symbol") == gone for r in data["results"])
        if served and data.get("up_to_date") and not data.get("catching_up"):
            result.stale_unflagged += 1
            if os.environ.get("BENCH_FRESH_DEBUG"):
                print("stale:", question, head[:8], {k: data.get(k) for k in ("branch", "commit", "head", "up_to_date",
                      "worktree_changes")}, [(r["path"], r["symbol"]) for r in data["results"][:3]], flush=True)
        if data.get("commit") == head:
            result.seconds.append(time.perf_counter() - t0)
            return
        if time.perf_counter() - t0 > DEADLINE_S:
            raise SystemExit(f"no answer from HEAD {head[:8]} within {DEADLINE_S:g} s")
        time.sleep(0.02)


def scenarios(repo: Path) -> dict[str, Callable[[int, Result], None]]:
    def reset_hard(i: int, r: Result) -> None:
        name = f"bench_reset_{i}"
        wait_branch(repo, "main", add_function(repo, name))
        git(repo, "reset", "-q", "--hard", "HEAD~1")
        until_head(repo, name, name, r)

    def branch_f(i: int, r: Result) -> None:
        name = f"bench_branchf_{i}"
        git(repo, "branch", "-f", "side", "main")
        git(repo, "checkout", "-q", "side")
        tip = add_function(repo, name)
        wait_branch(repo, "side", tip)
        git(repo, "checkout", "-q", "main")
        git(repo, "branch", "-f", "side", "main")
        target = git(repo, "rev-parse", "main")
        t0 = time.perf_counter()
        wait_branch(repo, "side", target)  # not checked out: its index, not an answer
        r.seconds.append(time.perf_counter() - t0)

    def update_ref(i: int, r: Result) -> None:
        name = f"bench_updateref_{i}"
        wait_branch(repo, "main", add_function(repo, name))
        git(repo, "update-ref", "refs/heads/main", "HEAD~1")
        git(repo, "reset", "-q", "--hard")  # the work tree follows (update-ref left it alone)
        until_head(repo, name, name, r)

    def filter_branch(i: int, r: Result) -> None:
        name = f"bench_filter_{i}"
        wait_branch(repo, "main", add_function(repo, name))
        git(repo, "filter-branch", "-f", "--index-filter",
            f"git rm -q --cached --ignore-unmatch bench_fresh/{name}.py", "HEAD~1..HEAD")
        until_head(repo, name, name, r)

    def checkout_b(i: int, r: Result) -> None:
        name = f"bench_newbranch_{i}"
        git(repo, "checkout", "-q", "-b", f"new_{i}", "main")
        add_function(repo, name)
        until_head(repo, name, None, r)
        git(repo, "checkout", "-q", "main")

    def amend(i: int, r: Result) -> None:
        old, new = f"bench_amend_old_{i}", f"bench_amend_new_{i}"
        wait_branch(repo, "main", add_function(repo, old))
        (repo / "bench_fresh" / f"{old}.py").unlink()
        add_function(repo, new, commit=False)
        git(repo, "commit", "-q", "--amend", "-m", f"add {new}")
        until_head(repo, old, old, r)

    def rebase(i: int, r: Result) -> None:
        old, new = f"bench_rebase_old_{i}", f"bench_rebase_new_{i}"
        git(repo, "checkout", "-q", "-b", f"topic_{i}", "main")
        tip = add_function(repo, old)
        wait_branch(repo, f"topic_{i}", tip)
        git(repo, "checkout", "-q", "main")
        add_function(repo, f"bench_base_{i}")
        git(repo, "checkout", "-q", f"topic_{i}")
        # rewrite the topic commit while rebasing it: the old name is gone from the result
        git(repo, "-c", "sequence.editor=:", "rebase", "-q", "--exec",
            f"git mv bench_fresh/{old}.py bench_fresh/{new}.py && sed -i s/{old}/{new}/ bench_fresh/{new}.py && "
            f"git commit -q --amend -a -m 'add {new}'", "main")
        until_head(repo, old, old, r)
        git(repo, "checkout", "-q", "main")

    return {"reset --hard": reset_hard, "branch -f": branch_f, "update-ref": update_ref,
            "filter-branch": filter_branch, "checkout -b + commit": checkout_b, "amend": amend, "rebase": rebase}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p * (len(xs) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=140, help="standard-library modules in the repository")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each git command")
    parser.add_argument("--embedder", default=os.environ.get("GITRAG_EMBEDDER", "hash"))
    opts = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gitrag-bench-fresh-"))
    os.environ.update(GITRAG_HOME=str(tmp / "home"), GITRAG_EMBEDDER=opts.embedder, HOME=str(tmp))
    from gitrag.daemon import client, launch

    repo = tmp / "repo"
    make_corpus(repo, opts.files)
    launch.spawn()
    results: dict[str, Result] = {}
    try:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gitrag", "install", "--no-systemd", "--repo", str(repo)], check=True,
                       capture_output=True)
        first_s = time.perf_counter() - t0
        chunks = client.request("status", repo=str(repo))["repos"][0]["branches"][0]["points"]
        git(repo, "branch", "side")
        baseline = []  # an ask of an index already at HEAD: what every answer costs on this machine now
        for q in ("parse command line options", "read a configuration file", "format a date", "compress bytes",
                  "walk a directory tree"):
            t1 = time.perf_counter()
            ask(repo, q)
            baseline.append(time.perf_counter() - t1)
        only = [n for n in os.environ.get("BENCH_FRESH_ONLY", "").split(",") if n]
        for i in range(opts.rounds):
            for name, run in scenarios(repo).items():
                if only and name not in only:
                    continue
                run(i, results.setdefault(name, Result()))
    finally:
        client.request("stop", timeout=5.0)
    print(f"repository: {opts.files} standard-library modules, {chunks} chunks (first index {first_s:.1f} s), "
          f"embedder {opts.embedder}, {opts.rounds} rounds")
    print(f"an ask of an index at HEAD: p50 {statistics.median(baseline):.2f} s, max {max(baseline):.2f} s "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'git command':<22} {'p50 s':>6} {'p95 s':>6} {'max s':>6} {'answers':>8} {'stale, no note':>15}")
    every: list[float] = []
    stale = 0
    for name, r in results.items():
        every += r.seconds
        stale += r.stale_unflagged
        answers = str(r.answers) if name != "branch -f" else "(index)"
        print(f"{name:<22} {statistics.median(r.seconds):6.2f} {pct(r.seconds, 0.95):6.2f} {max(r.seconds):6.2f} "
              f"{answers:>8} {r.stale_unflagged:>15}")
    print(f"{'all':<22} {statistics.median(every):6.2f} {pct(every, 0.95):6.2f} {max(every):6.2f} {'':>8} {stale:>15}"
          f"   (goal: p95 <= 2 s, 0 stale without a note)")


if __name__ == "__main__":
    main()
