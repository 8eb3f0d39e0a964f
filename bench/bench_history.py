"""The commit history's costs, side by side: what it adds to a first index, `gitrag log`
latency on a 10,000-commit history, and `ask --blame` per result.

    python bench/bench_history.py --click GITDIR [--reps 2] [--commits 10000] [--json]

GITDIR is a clone or git dir of pallets/click (its code and history; no question set is
used). Three parts, each in one run on this machine (shared: read the ratios):

1. **first index**: a fresh GITRAG_HOME and a clone of click, ``Indexer.sync`` with the
   history step and without it (the step patched out), interleaved ``--reps`` times; the
   history step's own seconds, and what reading the whole history costs (budget None).
2. **log**: a synthetic repository of ``--commits`` commits (messages from click's real
   history, 1-4 of 300 files changed each, built with pygit2), its whole history read,
   then 100 questions: p50/p95 of the ranking (HistoryIndex.search, k = 10), and of the
   whole ``gitrag log --json`` command (a process each: interpreter start-up included;
   ``gitrag --version`` in the same run is that floor).
3. **blame**: libgit2's blame over 30 chunk-sized line ranges of click's source at HEAD.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _one_index(mode: str, home: str, repo: str) -> None:
    """Child process: one first index of ``repo`` in ``home``; prints its seconds as JSON."""
    os.environ["GITRAG_HOME"] = home
    from gitrag import logs
    from gitrag.index import history
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    logs.configure("warning")
    spent = {"history": 0.0}
    real = history.sync_branch

    def timed(*a, **kw):
        t = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            spent["history"] += time.perf_counter() - t

    history.sync_branch = timed if mode == "on" else (lambda *a, **kw: None)
    ws = open_workspace(repo)
    t0 = time.perf_counter()
    s = Indexer(ws).sync()
    total = time.perf_counter() - t0
    ws.close()
    print(json.dumps({"mode": mode, "seconds": total, "history": spent["history"], "commits": s.commits_indexed}))


def first_index(click: Path, reps: int, tmp: Path) -> dict:
    clone = tmp / "click"
    subprocess.run(["git", "clone", "-q", str(click), str(clone)], check=True)
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for rep in range(reps):
        for mode in ("off", "on"):
            home = tmp / f"home-{mode}-{rep}"
            out = subprocess.run([sys.executable, __file__, "--_one", mode, str(home), str(clone)],
                                 capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    import pygit2

    from gitrag.git.repo import GitRepo
    from gitrag.index.history import HistoryIndex

    hist = HistoryIndex(tmp / "full")
    t = time.perf_counter()
    full = hist.update(GitRepo(clone), "main", str(pygit2.Repository(str(clone)).head.target))
    full_s = time.perf_counter() - t
    hist.close()
    off = statistics.median(r["seconds"] for r in runs["off"])
    on = statistics.median(r["seconds"] for r in runs["on"])
    return {
        "runs": runs, "median_off_s": round(off, 3), "median_on_s": round(on, 3),
        "ratio_on_off": round(on / off, 3),
        "history_step_s": round(statistics.median(r["history"] for r in runs["on"]), 3),
        "history_share_of_on": round(statistics.median(r["history"] / r["seconds"] for r in runs["on"]), 3),
        "history_over_code": round(statistics.median(r["history"] / (r["seconds"] - r["history"])
                                                     for r in runs["on"]), 3),
        "commits_read_first": runs["on"][0]["commits"],
        "whole_history": {"commits": full.commits_read, "seconds": round(full_s, 3)},
    }


def synthetic_repo(click: Path, n: int, dest: Path) -> Path:
    import pygit2

    src = pygit2.Repository(str(click))
    messages = [c.message for c in src.walk(src.head.target)]
    repo = pygit2.init_repository(str(dest), initial_head="main")
    rng = random.Random(7)
    dirs = [f"pkg{d}" for d in range(10)]
    files = {d: {f"mod_{d}_{i}.py": repo.create_blob(f"# {d} {i}\n".encode()) for i in range(30)} for d in dirs}
    sig_time = 1_500_000_000
    parent: list = []
    dir_trees = {}

    def tree_of(d: str) -> pygit2.Oid:
        tb = repo.TreeBuilder()
        for name, blob in sorted(files[d].items()):
            tb.insert(name, blob, pygit2.enums.FileMode.BLOB)
        return tb.write()

    for d in dirs:
        dir_trees[d] = tree_of(d)
    for i in range(n):
        for _ in range(rng.randint(1, 4)):
            d = rng.choice(dirs)
            name = rng.choice(sorted(files[d]))
            files[d][name] = repo.create_blob(f"# {d} {name} {i}\n".encode())
            dir_trees[d] = tree_of(d)
        root = repo.TreeBuilder()
        for d in dirs:
            root.insert(d, dir_trees[d], pygit2.enums.FileMode.TREE)
        sig = pygit2.Signature("Bench", "bench@example.invalid", sig_time + 60 * i, 0)
        msg = f"{messages[i % len(messages)].strip()}\n\nsynthetic {i}\n"
        oid = repo.create_commit("refs/heads/main", sig, sig, msg, root.write(), parent)
        parent = [oid]
    return dest


def log_latency(click: Path, n: int, tmp: Path) -> dict:
    import pygit2

    from gitrag import config
    from gitrag.git.repo import GitRepo
    from gitrag.index.history import HistoryIndex

    t = time.perf_counter()
    repo_path = synthetic_repo(click, n, tmp / "synthetic")
    built = time.perf_counter() - t
    os.environ["GITRAG_HOME"] = str(tmp / "home-log")
    data_dir = config.repo_data_dir(GitRepo(str(repo_path)).common_dir)
    hist = HistoryIndex(data_dir)
    repo = pygit2.Repository(str(repo_path))
    git = GitRepo(repo_path)
    t = time.perf_counter()
    up = hist.update(git, "main", str(repo.head.target))
    read_s = time.perf_counter() - t
    rng = random.Random(3)
    subjects = [c.message.split("\n")[0] for c in pygit2.Repository(str(click)).walk(pygit2.Repository(str(click)).head.target)]
    questions = []
    for _ in range(100):
        words = rng.choice(subjects).split()
        rng.shuffle(words)
        questions.append(" ".join(words[: max(2, len(words) - 1)]))
    times = []
    for q in questions:
        t = time.perf_counter()
        hist.search("main", q, k=10)
        times.append((time.perf_counter() - t) * 1000)
    hist.close()
    cli = []
    for q in questions[:10]:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gitrag", "log", q, "--repo", str(repo_path), "--json"],
                       check=True, capture_output=True)
        cli.append((time.perf_counter() - t) * 1000)
    floor = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gitrag", "--version"], check=True, capture_output=True)
        floor.append((time.perf_counter() - t) * 1000)
    q = statistics.quantiles(times, n=20)
    return {"commits": up.commits_reachable, "build_s": round(built, 1), "read_s": round(read_s, 2),
            "search_ms": {"p50": round(statistics.median(times), 2), "p95": round(q[18], 2)},
            "cli_ms": {"p50": round(statistics.median(cli), 1),
                       "gitrag_version_p50": round(statistics.median(floor), 1)}}


def blame_cost(click: Path, tmp: Path) -> dict:
    """libgit2's blame of one range (the old ``ask --blame``) against git's (gitrag.git.blame),
    interleaved range by range; then ``ask --blame`` of 10 results as shipped (the ranges of a
    file in one git run, files in parallel) against 10 libgit2 blames."""
    import pygit2

    from gitrag.git import blame as gitblame
    from gitrag.git import log as gitlog
    from gitrag.git.repo import GitRepo

    raw = pygit2.Repository(str(click))
    repo = GitRepo(click)
    head = str(raw.head.target)
    tree = raw.head.peel(pygit2.Commit).tree
    paths = [p for p in ("src/click/core.py", "src/click/termui.py", "src/click/types.py", "src/click/utils.py",
                         "src/click/decorators.py", "src/click/shell_completion.py")]
    rng = random.Random(1)
    lib, cli, agree = [], [], 0
    ranges = []
    for _ in range(30):
        p = rng.choice(paths)
        size = len(tree[p].data.splitlines())
        a = rng.randint(1, size - 20)
        ranges.append((p, a, min(size, a + rng.randint(5, 40))))
    for key in ranges:
        t = time.perf_counter()
        old = gitlog.blame_range(repo, head, *key)
        lib.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        new = gitblame.blame_ranges(repo, head, [key])[key]
        cli.append((time.perf_counter() - t) * 1000)
        agree += old == new
    asks_lib, asks_cli = [], []
    for i in range(0, 30, 10):  # three "asks" of 10 results each
        keys = ranges[i:i + 10]
        t = time.perf_counter()
        for key in keys:
            gitlog.blame_range(repo, head, *key)
        asks_lib.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        gitblame.blame_ranges(repo, head, keys)
        asks_cli.append((time.perf_counter() - t) * 1000)
    return {"ranges": len(ranges), "agree": agree,
            "libgit2_ms": {"p50": round(statistics.median(lib)), "max": round(max(lib))},
            "git_ms": {"p50": round(statistics.median(cli)), "max": round(max(cli))},
            "ratio_p50": round(statistics.median(lib) / statistics.median(cli), 2),
            "ask_10_results_ms": {"libgit2": [round(x) for x in asks_lib], "git": [round(x) for x in asks_cli]}}


def main() -> int:
    if sys.argv[1:2] == ["--_one"]:
        _one_index(*sys.argv[2:5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--click", type=Path, required=True, help="a clone or git dir of pallets/click")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--part", action="append", choices=["index", "log", "blame"], help="run only these parts")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file (bench/results/README.md)")
    args = ap.parse_args()
    parts = args.part or ["index", "log", "blame"]
    tmp = Path(tempfile.mkdtemp(prefix="gitrag-history-"))
    out: dict = {}
    if "index" in parts:
        out["first_index"] = first_index(args.click, args.reps, tmp)
    if "log" in parts:
        out["log"] = log_latency(args.click, args.commits, tmp)
    if "blame" in parts:
        out["blame"] = blame_cost(args.click, tmp)
    print(json.dumps(out, indent=1))
    if args.record:
        import record  # bench/record.py, beside this script
        record.write(args.record, title="Commit history", issue=[20, 24], subject="history",
                     tables=[record.key_values(part, figures) for part, figures in out.items()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
