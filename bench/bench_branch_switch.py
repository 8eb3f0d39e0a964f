"""What a branch switch costs after a big branch: CPU of the sync of a new branch, before vs after (issue 21).

    python bench/bench_branch_switch.py --corpus DIR [--copies 3] [--files 3] [--rounds 2]
                                        [--baseline REV] [--after REV] [--far REV] [--keep DIR] [--json OUT]

The corpus (a git clone; sympy/sympy in BENCHMARKS.md) is cloned into a temporary folder,
its tree copied ``--copies`` times under ``copy-<n>/`` in one more commit (same texts:
nothing more to embed, more chunks to hold), and branch A (``main``) indexed once with
the baseline's code and the default (static) embedder. That index (repository and
GITRAG_HOME) is kept and put back at the same path before every measured run, so every
run starts from the same bytes. Then, per round and per code (``before`` = the gitrag
package of ``--baseline``, taken with ``git archive``; ``after`` = this checkout), in
turns, a fresh process syncs:

- ``new B``: a new branch B off A whose one commit appends a function to ``--files``
  Python files (the sync that creates B and applies its diff);
- ``commit on B``: one more commit on B (one file);
- ``back to A``: A again (nothing changed: a switch back);
- ``commit on A``: one commit on A (one file) while B still holds the old points.

``--only "A first,new B,..."`` runs those steps, ``A first`` being a sync of A with nothing
changed before the others (a new code's first sync counts the branch's points once).

With ``--far REV`` (a commit far behind A in history), also ``far C`` (a branch at REV,
started from A) and ``near D`` (a branch one commit off C): what choosing a branch's root
by difference saves when a new branch is near a branch that is far from A.

Printed per step and code: the sync process's CPU seconds (``time.process_time``: this
process's threads; the engine's included), of which in the store's optimizer, and the
points written (upserted, deleted, payload-moved). CPU, not wall: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@gitrag.invalid",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@gitrag.invalid"}


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **ENV}, input=stdin).stdout


def commit_appending(repo: Path, parent: str, paths: list[str], tag: str) -> str:
    """A commit on ``parent`` that appends a function to each of ``paths`` (no checkout)."""
    tree = parent + "^{tree}"
    index = repo / ".git" / f"bench-index-{tag}"
    env = {**os.environ, **ENV, "GIT_INDEX_FILE": str(index)}

    def run(*args: str, stdin: str | None = None) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                              env=env, input=stdin).stdout

    run("read-tree", tree)
    for n, path in enumerate(paths):
        text = git(repo, "show", f"{parent}:{path}")
        text += (f"\n\ndef bench_switch_{tag}_{n}(value):\n    \"\"\"Step {tag} of the branch-switch bench.\"\"\"\n"
                 f"    return value * {n + 2} + {len(tag)}\n")
        blob = run("hash-object", "-w", "--stdin", stdin=text).strip()
        run("update-index", "--cacheinfo", f"100644,{blob},{path}")
    new_tree = run("write-tree").strip()
    index.unlink(missing_ok=True)
    return git(repo, "commit-tree", new_tree, "-p", parent, "-m", f"bench {tag}").strip()


def with_copies(repo: Path, commit: str, copies: int) -> str:
    """A commit on ``commit`` whose tree is its tree plus ``copies`` copies of it under ``copy-<n>/``."""
    if copies <= 0:
        return commit
    index = repo / ".git" / "bench-index-copies"
    env = {**os.environ, **ENV, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "-C", str(repo), "read-tree", commit], check=True, env=env)
    for n in range(1, copies + 1):
        subprocess.run(["git", "-C", str(repo), "read-tree", f"--prefix=copy-{n}/", commit], check=True, env=env)
    tree = subprocess.run(["git", "-C", str(repo), "write-tree"], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()
    index.unlink()
    return git(repo, "commit-tree", tree, "-p", commit, "-m", f"{copies} copies of the tree").strip()


def prepare(corpus: Path, work: Path, copies: int, files: int, far: str | None, baseline: Path) -> dict[str, Any]:
    """The kept index of A and the commits of the steps (refs made by the worker as it goes)."""
    repo = work / "repo"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(corpus), str(repo)], check=True)
    git(repo, "checkout", "-q", "-B", "main")
    head = with_copies(repo, git(repo, "rev-parse", "HEAD").strip(), copies)
    git(repo, "update-ref", "refs/heads/main", head)
    py = [p for p in git(repo, "ls-tree", "-r", "-l", head).splitlines() if p.endswith(".py")]
    mid = [line.split("\t", 1)[1] for line in py if 4000 < int(line.split()[3]) < 40000]
    mid = mid[:: max(1, len(mid) // 50)]  # a spread of mid-sized files, the same every run
    commits = {
        "new B": ("topic", commit_appending(repo, head, mid[:files], "b1")),
    }
    commits["commit on B"] = ("topic", commit_appending(repo, commits["new B"][1], mid[files : files + 1], "b2"))
    commits["back to A"] = ("main", head)
    commits["commit on A"] = ("main", commit_appending(repo, head, mid[files + 1 : files + 2], "a1"))
    if far is not None:
        far_commit = with_copies(repo, git(repo, "rev-parse", far).strip(), copies)
        far_py = [line.split("\t", 1)[1] for line in git(repo, "ls-tree", "-r", "-l", far_commit).splitlines()
                  if line.endswith(".py") and 4000 < int(line.split()[3]) < 40000]
        commits["far C"] = ("far", far_commit)
        commits["near D"] = ("near", commit_appending(repo, far_commit, far_py[:files], "d1"))
    (work / "home").mkdir()
    t0 = time.perf_counter()
    out = work / "index-a.json"
    env = {**os.environ, "PYTHONPATH": str(baseline), "GITRAG_HOME": str(work / "home")}
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--index", str(repo), "--out", str(out)],
                   env=env, cwd=baseline, check=True)
    a = json.loads(out.read_text())
    if far is not None:  # its chunks embedded once, into the shared vector cache: the runs chunk, not embed
        git(repo, "update-ref", "refs/heads/warm", commits["far C"][1])
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--index", str(repo), "--out", str(out),
                        "--warm", "warm"], env=env, cwd=baseline, check=True)
        git(repo, "update-ref", "-d", "refs/heads/warm")
    print(f"A indexed: {a['chunks_total']} chunks, {a['cpu_s']:.1f} CPU-s, {time.perf_counter() - t0:.0f} s wall",
          file=sys.stderr, flush=True)
    return {"a": a, "steps": commits}


def index_once(repo: Path, out: Path, warm: str | None) -> None:
    """Branch A's first index (in this process, the gitrag on PYTHONPATH); ``warm``: index
    that branch, then forget it (its vectors stay in the cache)."""
    from gitrag.index.indexer import Indexer, forget_branch
    from gitrag.index.workspace import open_workspace

    t0 = time.process_time()
    ws = open_workspace(repo)
    try:
        s = Indexer(ws).sync(branch=warm or "main", history=warm is None)
        if warm:
            gone = ws.state.branch(warm)
            assert gone is not None
            forget_branch(ws, gone)
            return
    finally:
        ws.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the worker pool's
    out.write_text(json.dumps({"chunks_total": s.chunks_total,
                               "cpu_s": time.process_time() - t0 + children.ru_utime + children.ru_stime}))


def run_steps(repo: Path, steps: dict[str, list[str]], out: Path) -> None:
    """Each step: move its branch's ref, sync that branch in a fresh workspace (this process)."""
    from gitrag.index.indexer import Indexer
    from gitrag.index.store.edge import EdgeStore
    from gitrag.index.workspace import open_workspace

    spent: dict[str, float] = {"optimize_cpu_s": 0.0, "optimizes": 0, "store_upserted": 0, "store_deleted": 0,
                               "store_moved": 0}
    real = EdgeStore.optimize

    def counted(self: EdgeStore, name: str) -> None:
        t = time.process_time()
        try:
            real(self, name)
        finally:
            spent["optimize_cpu_s"] += time.process_time() - t
            spent["optimizes"] += 1

    def counting(method: Any, key: str, arg: int) -> Any:
        def wrapped(self: EdgeStore, name: str, *args: Any) -> Any:
            spent[key] += len(args[arg])
            return method(self, name, *args)
        return wrapped

    # every store write of the step, the new branch's set-up included (the summary counts the diff's only)
    wrappers = {"optimize": counted, "upsert": counting(EdgeStore.upsert, "store_upserted", 0),
                "delete": counting(EdgeStore.delete, "store_deleted", 0),
                "set_payload_of": counting(EdgeStore.set_payload_of, "store_moved", 0)}
    for attr, wrapper in wrappers.items():
        setattr(EdgeStore, attr, wrapper)
    rows = {}
    ws = open_workspace(repo)  # opened once, as the daemon holds it (the model loaded before the steps)
    ws.embedder.embed_documents(["warm up"])
    try:
        for name, (branch, commit) in steps.items():
            git(repo, "update-ref", f"refs/heads/{branch}", commit)
            spent.update(dict.fromkeys(spent, 0))
            t0, w0 = time.process_time(), time.perf_counter()
            s = Indexer(ws).sync(branch=branch)
            cpu, wall = time.process_time() - t0, time.perf_counter() - w0
            rows[name] = {"cpu_s": cpu, "wall_s": wall, "upserted": s.points_upserted, "deleted": s.points_deleted,
                          "moved": s.payloads_updated, "embedded": s.chunks_embedded, "chunks": s.chunks_total,
                          "started_from": s.started_from, **spent}
            br = ws.state.branch(branch)
            rows[name]["root"] = br.root if br is not None else None
            print(f"    {name}: {cpu:.2f} CPU-s (optimize {spent['optimize_cpu_s']:.2f} in {spent['optimizes']:.0f}), "
                  f"store: upserted {spent['store_upserted']:.0f}, deleted {spent['store_deleted']:.0f}, "
                  f"moved {spent['store_moved']:.0f}; root {rows[name]['root']}", file=sys.stderr, flush=True)
    finally:
        ws.close()
    out.write_text(json.dumps(rows))


def code_of(rev: str, out: Path, name: str) -> Path:
    """The gitrag package of ``rev`` of this repository, in ``out`` (``git archive``)."""
    rev = git(ROOT, "rev-parse", "--short", rev).strip()
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gitrag"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    print(f"{name} = gitrag at {rev}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--copies", type=int, default=3, help="copies of the tree added under copy-<n>/")
    ap.add_argument("--files", type=int, default=3, help="files branch B changes")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", default="main", help="git revision of the 'before' code")
    ap.add_argument("--after", default=None, help="git revision of the 'after' code (default: this checkout as it is)")
    ap.add_argument("--far", default=None, help="a commit far behind A: adds the 'far C' and 'near D' steps")
    ap.add_argument("--json", type=Path, default=None, help="write every run's rows there")
    ap.add_argument("--only", default=None, help="these steps only, comma-separated, in this order; 'A first' is a "
                    "sync of A with nothing changed (what a code's first sync after an upgrade counts once)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep A's index in this folder, and reuse it when it is there (same corpus and options)")
    ap.add_argument("--index", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--warm", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--steps", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.index is not None:
        index_once(args.index, args.out, args.warm)
        return
    if args.steps is not None:
        run_steps(Path(args.steps), json.loads(os.environ["BENCH_STEPS"]), args.out)
        return
    if args.corpus is None:
        ap.error("--corpus is required")
    base = Path(tempfile.mkdtemp(prefix="bench-switch-", dir=args.work))
    try:
        code = code_of(args.baseline, base / "code-before", "before")
        after = code_of(args.after, base / "code-after", "after") if args.after else ROOT
        golden = args.keep.resolve() if args.keep else base / "golden"
        work = golden.with_name(golden.name + "-run") if args.keep else base / "work"  # the same path every time
        if (golden / "prep.json").is_file():
            prep = json.loads((golden / "prep.json").read_text())
            print(f"A's index reused from {golden}", file=sys.stderr)
        else:
            work.mkdir()
            prep = prepare(args.corpus.resolve(), work, args.copies, args.files, args.far, code)
            (work / "prep.json").write_text(json.dumps(prep))
            shutil.rmtree(golden, ignore_errors=True)
            golden.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", str(work), str(golden)], check=True)
        if args.only:
            wanted = [w.strip() for w in args.only.split(",")]
            steps = {"A first": prep["steps"]["back to A"], **prep["steps"]}
            prep["steps"] = {w: steps[w] for w in wanted}
        codes = {"before": code, "after": after}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
        for r in range(args.rounds):
            order = list(codes) if r % 2 == 0 else list(codes)[::-1]  # alternate who goes first
            for name in order:
                shutil.rmtree(work, ignore_errors=True)
                subprocess.run(["cp", "-a", str(golden), str(work)], check=True)  # the same path: the same index
                print(f"  round {r + 1}, {name}:", file=sys.stderr, flush=True)
                out = base / f"{name}-{r}.json"
                env = {**os.environ, "PYTHONPATH": str(codes[name]), "GITRAG_HOME": str(work / "home"),
                       "BENCH_STEPS": json.dumps(prep["steps"])}
                subprocess.run([sys.executable, str(Path(__file__).resolve()), "--steps", str(work / "repo"),
                                "--out", str(out)], env=env, cwd=codes[name], check=True)
                runs[name].append(json.loads(out.read_text()))
        report(prep, runs)
        if args.json is not None:
            args.json.write_text(json.dumps({"a": prep["a"], "runs": runs}, indent=1))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(prep: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\nA: {prep['a']['chunks_total']} chunks. Median over {len(runs['after'])} rounds; CPU s (optimize CPU s), "
          "store points upserted / deleted / moved (the last round's)")
    for step in prep["steps"]:
        cells = []
        for name in runs:
            rows = [r[step] for r in runs[name]]
            cpu = statistics.median(r["cpu_s"] for r in rows)
            opt = statistics.median(r["optimize_cpu_s"] for r in rows)
            last = rows[-1]
            cells.append(f"{name} {cpu:6.2f} ({opt:5.2f}) "
                         f"{last['store_upserted']:.0f}/{last['store_deleted']:.0f}/{last['store_moved']:.0f}")
        b = statistics.median(r[step]["cpu_s"] for r in runs["before"])
        a = statistics.median(r[step]["cpu_s"] for r in runs["after"])
        print(f"  {step:>12}: {' | '.join(cells)} | after/before {a / max(b, 1e-9):.3f}")


if __name__ == "__main__":
    main()
