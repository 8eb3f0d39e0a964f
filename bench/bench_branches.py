"""Disk of many live branches, and query latency through the daemon, before vs after (issue 15).

    python bench/bench_branches.py --corpus DIR [--branches 20] [--commits 3] [--queries 40]
                                   [--baseline REV | --baseline none]

For each layout, in one run and one after the other on the same machine: clone the corpus
into a temporary folder, index its main branch, then create ``--branches`` branches off
main, each ``--commits`` commits away (every commit appends a new function to a Python file
of the corpus), index each, and print the bytes on disk after every step: the store (the
Qdrant Edge folders), the state (``state.db``) and, for the new layout, the vector cache
shared by all repositories (``cache.db``; the old layout keeps its cache inside
``state.db``). Then start ``gitrag daemon`` and ask ``--queries`` questions through its
socket on the last branch (hybrid, k = 10), printing the p50 and p95 latency.

Layouts: ``before`` is the gitrag package of ``--baseline`` (default: the newest commit of
this repository whose index format is 1, i.e. per-branch collections), taken with
``git archive``; ``after`` is this checkout. The embedder is ``GITRAG_EMBEDDER`` (default
``hash``, the deterministic test embedder: disk and latency do not depend on the model).

Goal: total after all branches <= 1.3 x the one-branch total + the new chunks' share
(one-branch bytes per chunk x chunks embedded by the branches).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitrag.index.store.edge import disk_usage  # the store's own du (blocks, sparse WAL files count little)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUESTIONS = [
    "parse command line arguments", "read a file line by line", "join two paths", "compress data with gzip",
    "format a date as a string", "split a string on whitespace", "retry when a connection fails",
    "compute a hash of bytes", "serialize an object to json", "walk a directory tree recursively",
    "copy a file and keep its metadata", "decode base64 text", "sort a list in place by a key",
    "open a temporary file", "parse a url into its parts", "encode text as utf-8", "start a thread",
    "log a warning message", "read environment variables", "match a regular expression",
]


def sizes(data_root: Path) -> dict[str, int]:
    store = sum(disk_usage(p) for p in data_root.glob("*/qdrant"))
    state = sum(p.stat().st_size for p in data_root.glob("*/state.db*") if p.is_file())
    cache = sum(p.stat().st_size for p in data_root.glob("cache.db*") if p.is_file())
    return {"store": store, "state": state, "cache": cache, "total": store + state + cache}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@gitrag.invalid",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@gitrag.invalid"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env).stdout


def worker(corpus: Path, branches: int, commits: int, queries: int) -> dict[str, Any]:
    """One layout, in this process (the gitrag on PYTHONPATH): the rows and the latencies."""
    from gitrag.daemon import client
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    tmp = Path(tempfile.mkdtemp(prefix="bench-branches-"))
    os.environ["GITRAG_HOME"] = str(tmp / "home")
    os.environ.setdefault("GITRAG_EMBEDDER", "hash")
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(corpus), str(repo)], check=True)
    git(repo, "checkout", "-q", "-B", "main")
    data_root = tmp / "home" / "data"
    py_files = [p for p in git(repo, "ls-files", "*.py").splitlines() if (repo / p).stat().st_size > 2000]

    def sync() -> Any:
        ws = open_workspace(repo)
        try:
            return Indexer(ws).sync()
        finally:
            ws.close()

    rows = []
    t0 = time.perf_counter()
    s = sync()
    rows.append({"step": "main", "chunks_total": s.chunks_total, "chunks_embedded": s.chunks_embedded,
                 "seconds": round(time.perf_counter() - t0, 2), **sizes(data_root)})
    print(f"  main: {s.chunks_total} chunks, {rows[-1]['total'] / 1e6:.1f} MB", file=sys.stderr, flush=True)
    for i in range(branches):
        git(repo, "checkout", "-q", "-b", f"topic-{i}", "main")
        for j in range(commits):
            target = repo / py_files[(i * 7 + j * 13) % len(py_files)]
            with target.open("a") as fh:
                fh.write(f"\n\ndef bench_branch_{i}_commit_{j}(value):\n"
                         f"    \"\"\"Step {j} of branch {i}.\"\"\"\n    return value * {i + 1} + {j}\n")
            git(repo, "commit", "-q", "-am", f"branch {i} commit {j}")
        t0 = time.perf_counter()
        s = sync()
        rows.append({"step": f"topic-{i}", "chunks_total": s.chunks_total, "chunks_embedded": s.chunks_embedded,
                     "seconds": round(time.perf_counter() - t0, 2), **sizes(data_root)})
        print(f"  topic-{i}: embedded {s.chunks_embedded}, {rows[-1]['total'] / 1e6:.1f} MB, "
              f"{rows[-1]['seconds']} s", file=sys.stderr, flush=True)
    latencies = []
    log = open(tmp / "daemon.log", "ab")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], stdin=subprocess.DEVNULL,
                              stdout=log, stderr=log, cwd=tmp)
    try:
        deadline = time.monotonic() + 60
        while not client.probe(timeout=0.5)["running"]:
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the daemon did not answer; see {tmp / 'daemon.log'}")
            time.sleep(0.1)
        client.request("ask", timeout=120, repo=str(repo), question="warm up", mode="hybrid")
        for n in range(queries):
            t = time.perf_counter()
            client.request("ask", timeout=120, repo=str(repo), question=QUESTIONS[n % len(QUESTIONS)], mode="hybrid")
            latencies.append((time.perf_counter() - t) * 1000)
    finally:
        daemon.terminate()
        daemon.wait(60)
        log.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"rows": rows, "latency_ms": latencies}


def baseline_code(rev: str | None, out: Path) -> Path:
    """The gitrag package of ``rev`` (default: the newest commit with index format 1)."""
    if rev is None:
        revs = git(ROOT, "log", "--format=%H", "-S", "FORMAT_VERSION = 1\n", "--", "gitrag/index/state.py").split()
        for cand in ["HEAD"] + [f"{r}^" for r in revs]:
            if "FORMAT_VERSION = 1\n" in git(ROOT, "show", f"{cand}:gitrag/index/state.py"):
                rev = cand
                break
        else:
            raise SystemExit("no commit with index format 1 in this history; pass --baseline REV")
    rev = git(ROOT, "rev-parse", "--short", rev).strip()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gitrag"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    print(f"before = gitrag at {rev}", file=sys.stderr)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(name: str, result: dict[str, Any]) -> dict[str, float]:
    rows = result["rows"]
    print(f"\n{name}: step, chunks embedded, store MB, state MB, cache MB, total MB, sync s")
    for r in rows:
        print(f"  {r['step']:>9} {r['chunks_embedded']:>7} {r['store'] / 1e6:8.2f} {r['state'] / 1e6:8.2f} "
              f"{r['cache'] / 1e6:8.2f} {r['total'] / 1e6:8.2f} {r['seconds']:7.2f}")
    one, last = rows[0], rows[-1]
    new_chunks = sum(r["chunks_embedded"] for r in rows[1:])
    allowed = 1.3 * one["total"] + one["total"] / max(1, one["chunks_total"]) * new_chunks
    lat = result["latency_ms"]
    out = {"one": one["total"], "all": last["total"], "ratio": last["total"] / one["total"],
           "allowed": allowed, "p50": statistics.median(lat), "p95": pct(lat, 0.95),
           "branch_sync_s": statistics.median(r["seconds"] for r in rows[1:]) if rows[1:] else 0.0}
    print(f"  {len(rows) - 1} branches: {out['all'] / 1e6:.2f} MB = {out['ratio']:.2f}x one branch "
          f"({out['one'] / 1e6:.2f} MB); goal <= {allowed / 1e6:.2f} MB (1.3x + {new_chunks} new chunks' share): "
          f"{'met' if out['all'] <= allowed else 'NOT met'}")
    print(f"  query through the daemon: p50 {out['p50']:.1f} ms, p95 {out['p95']:.1f} ms ({len(lat)} queries); "
          f"median branch sync {out['branch_sync_s']:.2f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="a git repository (copied, never modified)")
    ap.add_argument("--branches", type=int, default=20)
    ap.add_argument("--commits", type=int, default=3, help="commits per branch")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--baseline", default=None, help="git revision of the 'before' layout, or 'none'")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)  # write the result there
    args = ap.parse_args()
    if args.worker:
        args.worker.write_text(json.dumps(worker(args.corpus.resolve(), args.branches, args.commits, args.queries)))
        return
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-branches-code-") as code_dir:
        layouts = {"after": ROOT}
        if args.baseline != "none":
            layouts = {"before": baseline_code(args.baseline, Path(code_dir)), **layouts}
        for name, code in layouts.items():
            print(f"{name}:", file=sys.stderr, flush=True)
            env = {**os.environ, "PYTHONPATH": str(code)}
            out = Path(code_dir) / f"{name}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out), "--corpus", str(args.corpus),
                   "--branches", str(args.branches), "--commits", str(args.commits), "--queries", str(args.queries)]
            subprocess.run(cmd, env=env, cwd=code, check=True, stdout=sys.stderr)
            results[name] = report(name, json.loads(out.read_text()))
    if "before" in results:
        b, a = results["before"], results["after"]
        print(f"\nafter/before: disk with all branches {a['all'] / b['all']:.3f}x, one branch {a['one'] / b['one']:.3f}x, "
              f"query p50 {a['p50'] / b['p50']:.3f}x (p95 {a['p95'] / b['p95']:.3f}x), "
              f"branch sync {a['branch_sync_s'] / max(1e-9, b['branch_sync_s']):.3f}x")


if __name__ == "__main__":
    main()
