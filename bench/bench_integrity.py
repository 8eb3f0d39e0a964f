"""The vector cache format and the integrity checks, measured (issue 23).

    python bench/bench_integrity.py dtype --corpus DIR [--embedder NAME]
    python bench/bench_integrity.py cost --corpus REPO [--questions N]

``dtype``: bench/bench_retrieval.py twice, in one run, on the corpora in DIR (see that
script), each in a fresh GITRAG_HOME: once with the cache keeping float32 vectors, once
with float16 (the shipped form); prints every shared set's figures of both, and the
largest difference.

``cost`` (REPO: a git repository, e.g. bench/eval/make_stdlib_corpus.sh's): a first index
in a fresh GITRAG_HOME, then

- bytes of ``cache.db`` per chunk in format 2 (this one), and in format 1 (the same
  vectors written to the previous release's layout: float32 ``WITHOUT ROWID`` rows with
  the text key, no digest), each file checkpointed and VACUUMed;
- the share of the first index's CPU spent computing and checking digests (cache rows
  and payloads), timed inside the one process;
- warm queries (``--questions`` of them, the corpus's own function names as questions),
  each asked with the result check and without it, interleaved: p50 of both and the share
  of the query spent in the check.

Timings are ratios within one process on a machine that may be shared; bytes are exact.
"""

from __future__ import annotations

import argparse
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
            code = ("import numpy, runpy, sys, gitrag.index.vector_cache as c; "
                    f"c.DTYPE = numpy.{name}; sys.argv = sys.argv[1:]; "
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

    from gitrag.index.vector_cache import decode_key, unpack_sparse

    src = sqlite3.connect(cache)
    names = dict(src.execute("SELECT id, name FROM fingerprints"))
    dst = sqlite3.connect(out)
    dst.executescript("""
CREATE TABLE vectors(hash TEXT NOT NULL, fingerprint TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY(hash, fingerprint)) WITHOUT ROWID;
CREATE TABLE sparse(hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;""")
    rows = [(decode_key(k), names[f], np.frombuffer(v, dtype=np.float16).astype(np.float32).tobytes())
            for k, f, v in src.execute("SELECT key, fp, vec FROM vectors")]
    dst.executemany("INSERT INTO vectors VALUES(?,?,?)", sorted(rows))
    sparse = []
    for k, version, data in src.execute("SELECT key, version, data FROM sparse"):
        vec = unpack_sparse(data)
        sparse.append((f"{version}:{decode_key(k)}", json.dumps([vec.indices, vec.values])))
    dst.executemany("INSERT INTO sparse VALUES(?,?)", sorted(sparse))
    dst.commit()
    dst.execute("VACUUM")
    dst.close()
    src.close()
    return out.stat().st_size


def cost(args: argparse.Namespace) -> int:
    home = tempfile.mkdtemp(prefix="gitrag-bench-integrity-")
    os.environ["GITRAG_HOME"] = home
    import gitrag.index.integrity as integrity
    import gitrag.index.vector_cache as vector_cache
    import gitrag.index.views as views
    import gitrag.query.retrieval as retrieval
    from gitrag import config
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.surfaces import output

    spent = {"digest": 0.0, "calls": 0}

    def timed(fn):
        def inner(*a, **kw):
            t = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent["digest"] += time.process_time() - t
                spent["calls"] += 1
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
    ws = open_workspace(args.corpus)
    try:
        t0 = time.process_time()
        with output.progress_bar(False) as progress:
            summary = Indexer(ws, progress).sync()
        index_cpu = time.process_time() - t0
        digest_cpu = max(0.0, spent["digest"] - overhead * spent["calls"])
        chunks = summary.chunks_total
        cache = config.data_root() / "cache.db"
        ws.state.cache.db.execute("VACUUM")
        ws.state.cache.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        f2 = cache.stat().st_size
        f1 = _format1_bytes(cache, Path(home) / "format1.db")
        print(f"first index: {chunks} chunks, {index_cpu:.1f} CPU-s; digests and signatures {digest_cpu:.3f} CPU-s "
              f"({spent['calls']} calls, timing overhead {1e6 * overhead:.2f} us a call taken off) = "
              f"{100 * digest_cpu / index_cpu:.2f}% of it")
        print(f"cache.db bytes per chunk: format 1 (float32, WITHOUT ROWID, text keys) {f1 / chunks:.0f}; "
              f"format 2 (float16, rowid rows, digests) {f2 / chunks:.0f}; ratio {f2 / f1:.3f}")
        names = sorted({r.payload.get("symbol", "") for r in ws.state.points(ws.repo.branch())} - {""})
        rng = random.Random(23)
        questions = [n.replace("_", " ") for n in rng.sample(names, min(args.questions, len(names)))]
        check = retrieval.check_results
        checked: list[float] = []

        def timed_check(*a, **kw):
            t = time.perf_counter()
            try:
                return check(*a, **kw)
            finally:
                checked.append(time.perf_counter() - t)

        for q in questions[:5]:  # warm the model, the shard and the symbol graph
            retrieval.search(ws, q, snippets=False)
        on: list[float] = []
        off: list[float] = []
        for q in questions:
            for with_check in ((True, False) if rng.random() < 0.5 else (False, True)):
                retrieval.check_results = timed_check if with_check else (lambda *a, **kw: 0)
                t = time.perf_counter()
                retrieval.search(ws, q, snippets=False)
                (on if with_check else off).append((time.perf_counter() - t) * 1000)
        retrieval.check_results = check
        p_on, p_off = statistics.median(on), statistics.median(off)
        inside = [1000 * x for x in checked]
        print(f"warm queries ({len(questions)}, interleaved): p50 {p_off:.2f} ms unchecked, {p_on:.2f} ms checked "
              f"(ratio {p_on / p_off:.3f}); time inside the check: p50 {statistics.median(inside):.3f} ms "
              f"= {100 * statistics.median(inside) / p_on:.2f}% of the checked p50, mean {statistics.mean(inside):.3f} ms "
              f"= {100 * sum(inside) / sum(on):.2f}% of the checked queries' time")
    finally:
        ws.close()
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
    args = ap.parse_args()
    return dtype(args) if args.what == "dtype" else cost(args)


if __name__ == "__main__":
    raise SystemExit(main())
