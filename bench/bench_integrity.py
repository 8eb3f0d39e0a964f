"""The vector cache format and the integrity checks, measured (issue 23).

    python bench/bench_integrity.py dtype --corpus DIR [--embedder NAME]
    python bench/bench_integrity.py cost --corpus REPO [--questions N]
    python bench/bench_integrity.py files --corpus REPO [--home DIR]

``dtype``: bench/bench_retrieval.py twice, in one run, on the corpora in DIR (see that
script), each in a fresh GITRAG_HOME: once with the cache keeping float32 vectors, once
with float16 (cache format 2's form; ``bench_disk.py recall`` compares the shipped int8 of
format 3 too); prints every shared set's figures of both, and the largest difference.

``cost`` (REPO: a git repository, e.g. bench/eval/make_stdlib_corpus.sh's): a first index
in a fresh GITRAG_HOME, then

- bytes of ``cache.db`` per chunk in this format (3), and in format 1 (the same
  vectors written to the previous release's layout: float32 ``WITHOUT ROWID`` rows with
  the text key, no digest), each file checkpointed and VACUUMed;
- the share of the first index's CPU spent computing and checking digests (cache rows
  and payloads), timed inside the process that computes them all (the pool's workers
  compute none), over the CPU of the whole process tree (this process and the pool's
  worker processes, which the sync waits for: ``RUSAGE_SELF`` + ``RUSAGE_CHILDREN``,
  before and after the index);
- warm queries (``--questions`` of them, the corpus's own function names as questions),
  each asked with the result check and without it, interleaved: p50 of both and the share
  of the query spent in the check. With ``--before REV``, each question is also asked with
  the check of ``gitrag/index/integrity.py`` as it was at git revision REV (read with
  ``git show``), in the same interleaved run: before and after side by side. The vector
  cache's memory of checked signature rows is emptied before every query, so each query
  pays for its points as if this process read them first (a daemon asked about the same
  code again pays less).

``files``: the store file record (gitrag.index.store.files) of each collection of REPO's
index (made first in ``--home``, default a fresh GITRAG_HOME; an index there is reused): its
files, and the CPU of :func:`check` and :func:`write` (p50 of 20 each) beside the CPU of the
engine's own open and close of the shard (``EdgeShard.load`` + ``close``, p50 of 10), which
every process that opens the collection pays with them.

Timings are ratios within one process on a machine that may be shared; bytes are exact.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def dtype(args: argparse.Namespace) -> int:
    results = {}
    for name in ("float32", "float16"):
        with tempfile.TemporaryDirectory(prefix=f"gitrag-bench-{name}-") as home:
            code = ("import runpy, sys, gitrag.index.vector_cache as c; "
                    f"c.DENSE = '{name}'; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')")
            cmd = [sys.executable, "-c", code, str(ROOT / "bench" / "bench_retrieval.py"), "--corpus", args.corpus,
                   "--json"] + (["--embedder", args.embedder] if args.embedder else [])
            env = {**os.environ, "GITRAG_HOME": home}
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            results[name] = json.loads(proc.stdout[proc.stdout.index("{"):])
    a, b = results["float32"]["variants"], results["float16"]["variants"]
    cols = [c for c in a["hybrid"] if not c.endswith("ms")]
    print(f"embedder {results['float16']['embedder']}; float32 vs float16 cache vectors, every variant of "
          "bench_retrieval.py (nDCG@10 semble sets, MRR@10 click, R@5 / MRR long set)")
    print("| variant | dtype | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    worst = (0.0, "", "")
    for v in a:
        for name, row in (("float32", a[v]), ("float16", b[v])):
            print(f"| {v} | {name} | " + " | ".join(f"{row.get(c, float('nan')):.3f}" for c in cols) + " |")
        for c in cols:
            d = abs(a[v].get(c, 0.0) - b[v].get(c, 0.0))
            if d > worst[0]:
                worst = (d, v, c)
    print(f"largest |float16 - float32| over every variant and column: {worst[0]:.4f} ({worst[1]}, {worst[2]})")
    return 0


def _format1_bytes(cache: Path, out: Path) -> int:
    """Bytes of the same vectors (and sparse vectors) in the format-1 layout."""
    import numpy as np

    from gitrag.index.vector_cache import decode_key, decode_vector, unpack_sparse

    src = sqlite3.connect(cache)
    names = dict(src.execute("SELECT id, name FROM fingerprints"))
    dst = sqlite3.connect(out)
    dst.executescript("""
CREATE TABLE vectors(hash TEXT NOT NULL, fingerprint TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY(hash, fingerprint)) WITHOUT ROWID;
CREATE TABLE sparse(hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;""")
    rows = [(decode_key(k), names[f], decode_vector(v).astype(np.float32).tobytes())
            for k, f, v in src.execute("SELECT key, fp, vec FROM vectors")]
    dst.executemany("INSERT INTO vectors VALUES(?,?,?)", sorted(rows))
    sparse = []
    for k, version, data in src.execute("SELECT key, version, data FROM sparse"):
        vec = unpack_sparse(data, version)
        sparse.append((f"{version}:{decode_key(k)}", json.dumps([vec.indices, vec.values])))
    dst.executemany("INSERT INTO sparse VALUES(?,?)", sorted(sparse))
    dst.commit()
    dst.execute("VACUUM")
    dst.close()
    src.close()
    return out.stat().st_size


def _tree_cpu() -> float:
    """CPU seconds of this process and of its children that have exited (and were waited for)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _check_at(rev: str):
    """``check_results`` of gitrag/index/integrity.py at git revision ``rev``."""
    import types

    text = subprocess.run(["git", "show", f"{rev}:gitrag/index/integrity.py"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    module = types.ModuleType(f"integrity_at_{rev}")
    module.__file__ = f"integrity@{rev}"
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    params = list(inspect.signature(module.check_results).parameters)

    def check(*a, **kw):
        return module.check_results(*a[: len(params)], **{k: v for k, v in kw.items() if k in params})
    return check


def cost(args: argparse.Namespace) -> int:
    if args.home:  # the queries only, in this new process, on the index a run before made there
        os.environ["GITRAG_HOME"] = args.home
        from gitrag.index.workspace import open_workspace

        ws = open_workspace(args.corpus)
        try:
            _queries(args, ws, "a new process")
        finally:
            ws.close()
        return 0
    home = tempfile.mkdtemp(prefix="gitrag-bench-integrity-")
    os.environ["GITRAG_HOME"] = home
    import gitrag.index.integrity as integrity
    import gitrag.index.vector_cache as vector_cache
    import gitrag.index.views as views
    from gitrag import config
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.surfaces import output

    spent = {"digest": 0.0, "calls": 0, "inside": 0}

    def timed(fn):
        def inner(*a, **kw):
            if spent["inside"]:  # a digest inside a timed call (put_signatures): counted once, by the outer
                return fn(*a, **kw)
            spent["inside"] = 1
            t = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent["digest"] += time.process_time() - t
                spent["calls"] += 1
                spent["inside"] = 0
        return inner

    def empty() -> None:
        return None

    probe = timed(empty)  # what the timing itself costs a call, taken off the figure below
    t = time.process_time()
    for _ in range(20000):
        probe()
    overhead = (time.process_time() - t) / 20000
    spent.update(digest=0.0, calls=0)

    vector_cache.digest = timed(vector_cache.digest)
    views.with_digest = timed(integrity.with_digest)
    views.signatures = timed(integrity.signatures)  # a write batch's vector signatures, made before with_digest
    vector_cache.VectorCache.put_signatures = timed(vector_cache.VectorCache.put_signatures)
    ws = open_workspace(args.corpus)
    try:
        t0, tree0 = time.process_time(), _tree_cpu()
        with output.progress_bar(False) as progress:
            summary = Indexer(ws, progress).sync()
        index_cpu, tree_cpu = time.process_time() - t0, _tree_cpu() - tree0
        digest_cpu = max(0.0, spent["digest"] - overhead * spent["calls"])
        chunks = summary.chunks_total
        cache = config.data_root() / "cache.db"
        ws.state.cache.db.execute("VACUUM")
        ws.state.cache.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        f2 = cache.stat().st_size
        f1 = _format1_bytes(cache, Path(home) / "format1.db")
        print(f"first index: {chunks} chunks, {tree_cpu:.1f} CPU-s for the process tree ({index_cpu:.1f} of them "
              f"this process's, {tree_cpu - index_cpu:.1f} the pool workers'); digests and signatures "
              f"{digest_cpu:.3f} CPU-s ({spent['calls']} calls, timing overhead {1e6 * overhead:.2f} us a call taken "
              f"off) = {100 * digest_cpu / tree_cpu:.2f}% of the tree's CPU ({100 * digest_cpu / index_cpu:.2f}% of "
              "this process's)")
        print(f"cache.db bytes per chunk: format 1 (float32, WITHOUT ROWID, text keys) {f1 / chunks:.0f}; "
              f"format 3 (int8, rowid rows, digests) {f2 / chunks:.0f}; ratio {f2 / f1:.3f}")
        _queries(args, ws, "the process that made the index")
    finally:
        ws.close()
    cmd = [sys.executable, __file__, "cost", "--corpus", args.corpus, "--questions", str(args.questions),
           "--home", home, *(["--before", args.before] if args.before else [])]
    return subprocess.run(cmd, check=False).returncode


def _queries(args: argparse.Namespace, ws, where: str) -> None:
    import gitrag.query.retrieval as retrieval

    names = sorted({r.payload.get("symbol", "") for r in ws.state.points(ws.repo.branch())} - {""})
    rng = random.Random(23)
    questions = [n.replace("_", " ") for n in rng.sample(names, min(args.questions, len(names)))]
    check = retrieval.check_results
    checks = {"checked": check}
    if args.before:
        checks[f"checked as at {args.before}"] = _check_at(args.before)
    inside: dict[str, list[float]] = {name: [] for name in checks}
    inside_cpu: dict[str, list[float]] = {name: [] for name in checks}

    def timed(name: str, fn):
        def timed_check(*a, **kw):
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                inside[name].append(1000 * (time.perf_counter() - t))
                inside_cpu[name].append(1000 * (time.process_time() - c))
        return timed_check

    variants = {"unchecked": lambda *a, **kw: 0, **{name: timed(name, fn) for name, fn in checks.items()}}
    for q in questions[:5]:  # warm the model, the shard and the symbol graph
        retrieval.search(ws, q, snippets=False)
    took: dict[str, list[float]] = {name: [] for name in variants}
    took_cpu: dict[str, list[float]] = {name: [] for name in variants}
    memo = getattr(ws.state.cache, "_verified", None)  # checked signature rows a process keeps (vector_cache)
    for q in questions:
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            retrieval.check_results = variants[name]
            if memo is not None:  # every query's points as if first read in this process: the dearer case
                memo.clear()
            t, c = time.perf_counter(), time.process_time()
            retrieval.search(ws, q, snippets=False)
            took[name].append((time.perf_counter() - t) * 1000)
            took_cpu[name].append((time.process_time() - c) * 1000)
    retrieval.check_results = check
    parts = _check_parts(ws, retrieval, questions, memo)
    _check_parts(ws, retrieval, questions, None)  # the memo kept, filled by a first pass over the questions
    kept = _check_parts(ws, retrieval, questions, None)  # and asked again: a daemon asked about these points again
    p_off = statistics.median(took["unchecked"])
    print(f"warm queries in {where} ({len(questions)}, each asked {len(variants)} ways, interleaved): "
          f"p50 {p_off:.2f} ms unchecked; load average {os.getloadavg()[0]:.1f}")
    for name in checks:
        p_on, ins = statistics.median(took[name]), inside[name]
        print(f"  {name}: p50 {p_on:.2f} ms (ratio to unchecked {p_on / p_off:.3f}); time inside the check: "
              f"p50 {statistics.median(ins):.3f} ms = {100 * statistics.median(ins) / p_on:.2f}% of its p50, "
              f"mean {statistics.mean(ins):.3f} ms = {100 * sum(ins) / sum(took[name]):.2f}% of its queries' time")
        cpu_q, cpu_c = statistics.median(took_cpu[name]), statistics.median(inside_cpu[name])
        print(f"    CPU (this process): query p50 {cpu_q:.2f} ms, check p50 {cpu_c:.3f} ms = {100 * cpu_c / cpu_q:.2f}%; "
              f"in total {100 * sum(inside_cpu[name]) / sum(took_cpu[name]):.2f}% of its queries' CPU")
    if parts:
        cpu_q = statistics.median(took_cpu["checked"])
        print("  inside this commit's check (one more pass, these parts timed), CPU p50 over the checked query's "
              "p50 above: " + "; ".join(f"{name} {statistics.median(v):.3f} ms = {100 * statistics.median(v) / cpu_q:.2f}%"
                                           for name, v in parts.items()))
    if kept:
        cpu_q = statistics.median(took_cpu["checked"])
        print("  the same with the cache's memory of checked signature rows kept (a daemon asked again about "
              "points it has shown), CPU p50: " + "; ".join(
                  f"{name} {statistics.median(v):.3f} ms = {100 * statistics.median(v) / cpu_q:.2f}%"
                  for name, v in kept.items()))
    if args.before:
        a, b = inside["checked"], inside[f"checked as at {args.before}"]
        print(f"  time inside the check, now / at {args.before}: "
              f"p50 {statistics.median(a) / statistics.median(b):.3f}, "
              f"mean {statistics.mean(a) / statistics.mean(b):.3f}")


def _check_parts(ws, retrieval, questions: list[str], memo) -> dict[str, list[float]]:
    """Each question asked once more with the check's parts timed (CPU ms each): the whole
    check, the store's ``vectors`` (the engine's retrieve of the shown points and its
    conversion to arrays) and the engine's retrieve alone, the floor of a check that reads
    the shown points' vectors, the cache's signature read and the comparison
    (``integrity._check_matrix``). ``memo``: the cache's memory of checked signature rows,
    emptied before each question (None: kept). Empty for a store without them."""
    store = ws.store
    real_shard, real_vectors = getattr(store, "_shard", None), getattr(store, "vectors", None)
    if real_shard is None or real_vectors is None:
        return {}
    parts: dict[str, list[float]] = {"the check": [], "store.vectors": [], "engine retrieve": [],
                                     "signature read": [], "comparison": []}

    def part(name: str, fn):
        def timed_part(*a, **kw):
            c = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                parts[name].append(1000 * (time.process_time() - c))
        return timed_part

    class Timed:  # the engine's shard with its retrieve timed
        def __init__(self, shard):
            self._shard, self.retrieve = shard, part("engine retrieve", shard.retrieve)

        def __getattr__(self, attr):
            return getattr(self._shard, attr)

    def vectors(*a, **kw):
        store._shard = lambda name: Timed(real_shard(name))
        try:
            return part("store.vectors", real_vectors)(*a, **kw)
        finally:
            store._shard = real_shard

    import gitrag.index.integrity as integrity

    check, cache, compare = retrieval.check_results, ws.state.cache, getattr(integrity, "_check_matrix", None)
    store.vectors, retrieval.check_results = vectors, part("the check", check)
    cache.get_signatures = part("signature read", cache.get_signatures)
    if compare is not None:
        integrity._check_matrix = part("comparison", compare)
    try:
        for q in questions:
            if memo is not None:
                memo.clear()
            retrieval.search(ws, q, snippets=False)
    finally:
        store.vectors, retrieval.check_results = real_vectors, check
        del store.vectors  # the class's method again (it was an instance attribute only while timed)
        del cache.get_signatures
        if compare is not None:
            integrity._check_matrix = compare
    return {name: v for name, v in parts.items() if v}


def files(args: argparse.Namespace) -> int:
    os.environ["GITRAG_HOME"] = args.home or tempfile.mkdtemp(prefix="gitrag-bench-files-")
    from qdrant_edge import EdgeShard

    from gitrag.index.indexer import Indexer
    from gitrag.index.store import files as record
    from gitrag.index.workspace import open_workspace
    from gitrag.surfaces import output

    ws = open_workspace(args.corpus)
    try:
        with output.progress_bar(False) as progress:
            summary = Indexer(ws, progress).sync()
        root = ws.store.root
    finally:
        ws.close()

    def p50(fn, n: int) -> float:
        took = []
        for _ in range(n):
            c = time.process_time()
            fn()
            took.append(1000 * (time.process_time() - c))
        return statistics.median(took)

    for folder in sorted(p for p in root.iterdir() if (p / record.RECORD).is_file()):
        taken = record.take(folder)
        small = [e for e in taken.values() if e[2] is not None]
        assert record.check(folder) is None, record.check(folder)
        check = p50(lambda f=folder: record.check(f), 20)
        write = p50(lambda f=folder: record.write(f), 20)
        engine = p50(lambda f=folder: EdgeShard.load(str(f)).close(), 10)
        record.write(folder)  # the engine's open and close rewrote file times
        print(f"{folder.name}: {summary.chunks_total} chunks, {len(taken)} files "
              f"({len(small)} of them <= {record.DIGEST_MAX // 1024} KB, {sum(e[0] for e in small):,} bytes digested); "
              f"CPU p50: check {check:.2f} ms, write {write:.2f} ms; the engine's load + close {engine:.2f} ms; "
              f"a process that opens and closes it: check + 2 writes = {check + 2 * write:.2f} ms = "
              f"{100 * (check + 2 * write) / engine:.0f}% of the engine's")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dtype", help="recall with float32 and float16 cache vectors, side by side")
    d.add_argument("--corpus", required=True)
    d.add_argument("--embedder", default=None)
    c = sub.add_parser("cost", help="cache bytes per chunk and the checks' share of index and query time")
    c.add_argument("--corpus", required=True)
    c.add_argument("--questions", type=int, default=200)
    c.add_argument("--home", default=None, help=argparse.SUPPRESS)  # the queries only, on that GITRAG_HOME's index
    c.add_argument("--before", default=None, metavar="REV",
                   help="also time the check of gitrag/index/integrity.py at this git revision, interleaved")
    f = sub.add_parser("files", help="the store file record's CPU per open, beside the engine's open")
    f.add_argument("--corpus", required=True)
    f.add_argument("--home", default=None, help="a GITRAG_HOME (its index reused; default: a fresh one)")
    args = ap.parse_args()
    return {"dtype": dtype, "cost": cost, "files": files}[args.what](args)


if __name__ == "__main__":
    raise SystemExit(main())
