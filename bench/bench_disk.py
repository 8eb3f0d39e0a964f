"""Where gitrag's disk goes, per chunk, and the recall the compact forms keep (issue 21).

    python bench/bench_disk.py disk --tree /path/sqlalchemy [--tree ...] [--code OLD_GITRAG_DIR]
    python bench/bench_disk.py report --home GITRAG_HOME --chunks N
    python bench/bench_disk.py recall --corpus DIR
    python bench/bench_disk.py sync-memory --tree /path/sqlalchemy
    [PYTHONPATH=OLD_GITRAG_DIR] python bench/bench_disk.py sparse-cpu --tree /path/sqlalchemy [--chunks 10000]
    python bench/bench_disk.py payload-cpu --state HOME/data/REPO/state.db
    python bench/bench_disk.py datatypes [--points 20000]

``disk``: each tree is indexed from an empty GITRAG_HOME (``gitrag index --json``, a fresh
process; with ``--code`` a second time by the gitrag package in that folder, e.g. one taken
from this repository's history with ``git archive``, side by side), then every file under
the home is measured by its allocated blocks (``du``: the engine preallocates sparse files)
and grouped (the store's WAL, dense vectors, sparse vectors and index, payloads and payload
indexes; ``state.db``, ``cache.db``, ``history.db``), and each SQLite file's tables and
indexes are measured with SQLite's ``dbstat`` (pages x page size). Printed as KB per chunk
(1 KB = 1,000 bytes), with ``--json`` as one object.

``report``: the same tables for an existing GITRAG_HOME.

``recall``: ``bench/bench_retrieval.py`` three times on the shared sets, each from an empty
GITRAG_HOME: once all float32 (the cache keeping float32 vectors, points not rounded to
float16, the store layout "current": float32 vectors), once with the cache keeping float16
vectors (cache format 2's form, the rest as shipped), once as shipped (int8 cache vectors);
prints nDCG/MRR/recall of the shipped pipeline (``hybrid``) and of plain RRF for each, and
the largest difference from float32 over every variant and column.

``sync-memory``: a first index of the tree in this process (the worker pool as shipped), from
an empty GITRAG_HOME, printing the process's anonymous and file-backed RSS (``RssAnon``,
``RssFile`` of /proc/self/status, MB) after every store flush, with the points written so
far: what grows with the collection in the process that writes the store.

``sparse-cpu``: CPU per chunk (µs, ``process_time``) of a sparse vector computed again from
the chunk's text (``sparse.document_vector``) against a cache's: the first ``--chunks``
embeddable chunks of the tree's tracked files (``chunking.analyze`` with its default token
limit), each computed on a fresh process's first pass (its term memos empty: the dearest
case) and again (memos warm), and, where the code on ``PYTHONPATH`` still caches sparse
vectors (``VectorCache.put_sparse``; cache format 3 and before), written to an empty cache
and read back (``get_sparse``: the SELECT, the digest check and the weights from the counts).

``payload-cpu``: bytes and read CPU of the ``points`` payloads of a ``state.db`` in both forms
(state format 3's JSON object, format 4's positional array, :func:`gitrag.index.state.stored_payload`):
every row's payload made in each form, then ``loaded_payload`` of all of them, the two forms
alternated ``--runs`` times in this process (median µs per row), and the dict each gives
checked equal, in the same key order.
``datatypes``: random unit 256-dim vectors in an Edge shard per dense storage datatype the
engine offers (``VectorStorageDatatype``; the shipped layout's segment settings, exact scan):
the vector files' allocated bytes per vector, the largest component error of what
``retrieve`` gives back, and recall@10 of 20 noisy queries against exact float32 cosines; then
random sparse vectors per sparse ``datatype``: allocated bytes of their storage and index per
point, the largest weight error read back.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _group(rel: str) -> str:
    if "/qdrant/" in f"/{rel}":
        for key, name in (("/wal/", "store: WAL"), ("vector_storage-sparse", "store: sparse vectors"),
                          ("vector_index-sparse", "store: sparse index"), ("vector_storage-dense", "store: dense vectors"),
                          ("vector_index-dense", "store: dense index"), ("payload_storage", "store: payloads"),
                          ("payload_index", "store: payload indexes")):
            if key in rel:
                return name
        return "store: other (id trackers, config)"
    name = Path(rel).name
    for db in ("state.db", "cache.db", "history.db"):
        if name.startswith(db):
            return db + ("" if name == db else " (its -wal/-shm)")
    return "other"


def measure(home: Path) -> dict[str, Any]:
    """{"files": {group: bytes}, "tables": {file: {table or index: bytes}}, "total": bytes}."""
    groups: dict[str, int] = {}
    total = 0
    for dirpath, _dirs, files in os.walk(home):
        for f in files:
            path = Path(dirpath) / f
            try:
                size = path.lstat().st_blocks * 512
            except OSError:
                continue
            total += size
            g = _group(str(path.relative_to(home)))
            groups[g] = groups.get(g, 0) + size
    tables: dict[str, dict[str, int]] = {}
    for db_path in sorted(home.glob("data/**/*.db")):
        try:
            db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
            rows = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
            db.close()
        except sqlite3.DatabaseError:
            continue
        tables[db_path.name] = {name: int(size) for name, size in rows if size}
    return {"files": dict(sorted(groups.items(), key=lambda kv: -kv[1])), "tables": tables, "total": total}


def index_tree(tree: Path, home: Path, code: Path | None) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITRAG_")}
    env.update(GITRAG_HOME=str(home), GITRAG_PROGRESS_INTERVAL="off", XDG_CONFIG_HOME=str(home / "config"))
    env.pop("XDG_RUNTIME_DIR", None)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(tree)], env=env,
                          cwd=str(code) if code is not None else None, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"gitrag index {tree} failed: {proc.stderr[-2000:]}")
    return int(json.loads(proc.stdout)["chunks_total"])


def print_report(label: str, got: dict[str, Any], chunks: int) -> None:
    kb = lambda b: b / 1000 / max(chunks, 1)  # noqa: E731 - a local shorthand for the table
    print(f"\n{label}: {chunks} chunks, {got['total'] / 1e6:.1f} MB, {kb(got['total']):.2f} KB per chunk")
    for name, size in got["files"].items():
        print(f"  {name:40s} {size / 1e6:8.1f} MB {kb(size):6.3f} KB/chunk")
    for db, rows in got["tables"].items():
        print(f"  {db}:")
        for name, size in rows.items():
            if size >= 100_000:
                print(f"    {name:38s} {size / 1e6:8.1f} MB {kb(size):6.3f} KB/chunk")


def disk(args: argparse.Namespace) -> int:
    out: dict[str, Any] = {}
    for tree in args.tree:
        runs = [("this code", None)] + ([("--code", Path(args.code))] if args.code else [])
        for label, code in runs:
            with tempfile.TemporaryDirectory(prefix="gitrag-disk-") as tmp:
                home = Path(tmp)
                chunks = index_tree(Path(tree), home, code)
                got = measure(home)
            out[f"{Path(tree).name} ({label})"] = {"chunks": chunks, **got}
            if not args.json:
                print_report(f"{Path(tree).name} ({label})", got, chunks)
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


def report(args: argparse.Namespace) -> int:
    got = measure(Path(args.home))
    if args.json:
        print(json.dumps({"chunks": args.chunks, **got}, indent=1))
    else:
        print_report(args.home, got, args.chunks)
    return 0


_FLOAT32 = ("import numpy, runpy, sys, gitrag.index.vector_cache as c, gitrag.index.vectors as v, "
            "gitrag.index.views as w; c.DENSE = 'float32'; "
            "u = lambda a, b: v.l2_normalise((a + v.PATH_WEIGHT * b)[None, :])[0]; v.combine = u; w.combine = u; "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
# the cache's vectors as format 2 kept them (float16), the rest as shipped
_FLOAT16 = ("import runpy, sys, gitrag.index.vector_cache as c; c.DENSE = 'float16'; "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
VARIANTS = (("float32", _FLOAT32, "current"), ("float16", _FLOAT16, None), ("shipped", None, None))


def recall(args: argparse.Namespace) -> int:
    results = {}
    for name, code, layout in VARIANTS:
        with tempfile.TemporaryDirectory(prefix=f"gitrag-recall-{name}-") as home:
            script = [str(ROOT / "bench" / "bench_retrieval.py"), "--corpus", args.corpus, "--json"]
            script += ["--embedder", args.embedder] if args.embedder else []
            cmd = [sys.executable, "-c", code, *script] if code else [sys.executable, *script]
            env = {k: v for k, v in os.environ.items() if k != "GITRAG_STORE_LAYOUT"}
            env["GITRAG_HOME"] = home
            if layout:
                env["GITRAG_STORE_LAYOUT"] = layout
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stderr[-3000:], file=sys.stderr)
                return 1
            results[name] = json.loads(proc.stdout[proc.stdout.index("{"):])
    worst = {}
    for other in ("float16", "shipped"):
        a, b = results["float32"]["variants"], results[other]["variants"]
        w = (0.0, "", "")
        for v in a:
            for col, x in a[v].items():
                y = b.get(v, {}).get(col)
                if isinstance(x, (int, float)) and isinstance(y, (int, float)) and "ms" not in col and "p50" not in col:
                    if abs(x - y) > w[0]:
                        w = (abs(x - y), v, col)
        worst[other] = w
    if args.json:
        print(json.dumps({**results, "worst": worst}, indent=1))
        return 0
    for v in ("hybrid", "rrf"):
        for name, _, _ in VARIANTS:
            row = results[name]["variants"].get(v, {})
            print(v, name, {k: round(x, 3) for k, x in row.items() if isinstance(x, (int, float))})
    for other, w in worst.items():
        print(f"largest |{other} - float32| over every variant and quality column: {w[0]:.4f} ({w[1]}, {w[2]})")
    return 0


def _rss() -> dict[str, int]:
    with open("/proc/self/status") as f:
        return {k: int(v.split()[0]) // 1024 for k, v in (line.split(":", 1) for line in f)
                if k in ("RssAnon", "RssFile", "VmHWM")}


def sync_memory(args: argparse.Namespace) -> int:
    from gitrag.index.indexer import Indexer
    from gitrag.index.store import edge
    from gitrag.index.workspace import open_workspace

    with tempfile.TemporaryDirectory(prefix="gitrag-syncmem-") as tmp:
        os.environ.update(GITRAG_HOME=tmp, GITRAG_PROGRESS_INTERVAL="off", XDG_CONFIG_HOME=str(Path(tmp) / "config"))
        os.environ.pop("XDG_RUNTIME_DIR", None)
        flush, upsert = edge.EdgeStore.flush, edge.EdgeStore.upsert
        written = [0]
        rows: list[dict[str, int]] = []

        def counted(self: Any, name: str, points: Any) -> None:
            upsert(self, name, points)
            written[0] += len(points)

        def sampled(self: Any, name: str) -> None:
            flush(self, name)
            rows.append({"points": written[0], **_rss()})
            if not args.json:
                print(rows[-1], flush=True)

        edge.EdgeStore.upsert, edge.EdgeStore.flush = counted, sampled  # type: ignore[method-assign]  # measuring: the store's writes wrapped
        with open_workspace(args.tree[0]) as ws:
            Indexer(ws).sync()
    if args.json:
        print(json.dumps(rows))
    return 0


def sparse_cpu(args: argparse.Namespace) -> int:
    import time

    from gitrag.index import sparse
    from gitrag.index.chunking import analyze
    from gitrag.index.vector_cache import VectorCache

    tree = Path(args.tree[0])
    files = subprocess.run(["git", "ls-files", "-z"], cwd=tree, capture_output=True, check=True).stdout.split(b"\0")
    texts: dict[str, str] = {}
    for name in filter(None, files):
        path = name.decode("utf-8", "surrogateescape")
        try:
            data = (tree / path).read_bytes()
            chunks = analyze(path, data).chunks
        except Exception:  # noqa: BLE001 - a file the chunker refuses is left out of the sample
            continue
        texts.update((c.hash, c.text) for c in chunks if c.embeddable)
        if len(texts) >= args.chunks:
            break
    keys = list(texts)[: args.chunks]
    us = lambda t: round(t * 1e6 / len(keys), 1)  # noqa: E731 - a local shorthand
    t0 = time.process_time()
    made = {h: sparse.document_vector(texts[h]) for h in keys}
    t1 = time.process_time()
    for h in keys:
        sparse.document_vector(texts[h])
    t2 = time.process_time()
    out: dict[str, Any] = {"chunks": len(keys), "compute first pass": us(t1 - t0), "compute again": us(t2 - t1),
                           "terms per chunk": round(sum(len(v.indices) for v in made.values()) / len(keys), 1)}
    with tempfile.TemporaryDirectory(prefix="gitrag-sparsecpu-") as tmp:
        cache = VectorCache(Path(tmp) / "cache.db")
        if hasattr(cache, "put_sparse"):
            t0 = time.process_time()
            for i in range(0, len(keys), 500):
                cache.put_sparse({h: made[h] for h in keys[i : i + 500]}, sparse.VERSION)
            t1 = time.process_time()
            got: dict[str, Any] = {}
            for i in range(0, len(keys), 500):
                got.update(cache.get_sparse(keys[i : i + 500], sparse.VERSION))
            t2 = time.process_time()
            assert len(got) == len(keys)
            out.update({"cache put": us(t1 - t0), "cache get": us(t2 - t1)})
        cache.close()
    print(json.dumps(out) if args.json else out)
    return 0


def payload_cpu(args: argparse.Namespace) -> int:
    import statistics
    import time

    from gitrag.index.state import loaded_payload, stored_payload

    columns = ("path", "blob", "chunk_hash")  # what a row keeps in its own columns, left out of both forms

    db = sqlite3.connect(f"file:{args.state}?mode=ro", uri=True)
    rows = db.execute("SELECT path, blob, chunk_hash, payload FROM points").fetchall()
    db.close()
    forms: dict[str, list[tuple[str, str, str, str]]] = {"object": [], "array": []}
    for path, blob, h, text in rows:
        full = loaded_payload(text, path, blob, h)
        obj = json.dumps({k: v for k, v in full.items() if k not in columns}, separators=(",", ":"),
                         ensure_ascii=False)
        forms["object"].append((obj, path, blob, h))
        forms["array"].append((stored_payload(full), path, blob, h))
    times: dict[str, list[float]] = {"object": [], "array": []}
    for _ in range(args.runs):
        for name, items in forms.items():
            t0 = time.process_time()
            for item in items:
                loaded_payload(*item)
            times[name].append(time.process_time() - t0)
    same = all(list(loaded_payload(*a).items()) == list(loaded_payload(*b).items())
               for a, b in zip(forms["object"], forms["array"], strict=True))
    out = {"rows": len(rows), "same payloads": same}
    for name, items in forms.items():
        out[f"{name}: bytes per row"] = round(sum(len(t.encode()) for t, *_ in items) / max(len(rows), 1), 1)
        out[f"{name}: read us per row"] = round(statistics.median(times[name]) * 1e6 / max(len(rows), 1), 2)
    print(json.dumps(out) if args.json else out)
    return 0


def datatypes(args: argparse.Namespace) -> int:
    from qdrant_edge import (
        Distance,
        EdgeConfig,
        EdgeOptimizersConfig,
        EdgeShard,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        HnswIndexConfig,
        Memory,
        Modifier,
        Point,
        Query,
        QueryRequest,
        SearchParams,
        SparseVector,
        UpdateOperation,
        VectorStorageDatatype,
    )

    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.points, 256)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[:20] + 0.5 * rng.standard_normal((20, 256)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = {}
    for name in ("Float16", "Uint8", "Turbo8", "Turbo16"):
        with tempfile.TemporaryDirectory(prefix=f"gitrag-dt-{name}-") as d:
            cfg = EdgeConfig(
                vectors={"d": EdgeVectorParams(size=256, distance=Distance.Cosine, memory=Memory.Cold,
                                               datatype=getattr(VectorStorageDatatype, name))},
                optimizers=EdgeOptimizersConfig(indexing_threshold=8_000, max_segment_size=16_000), wal_enabled=False,
                hnsw_config=HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10**9, payload_m=0))
            shard = EdgeShard.create(d, cfg)
            for i in range(0, args.points, 2000):
                shard.update(UpdateOperation.upsert_points(
                    [Point(j, {"d": x[j].tolist()}, {}) for j in range(i, min(i + 2000, args.points))]))
            shard.optimize()
            shard.flush()
            back = np.array([r.vector["d"] for r in shard.retrieve(list(range(100)), False, True)])
            found = 0
            for v in q:
                hits = shard.query(QueryRequest(limit=10, query=Query.Nearest(v.tolist(), using="d"),
                                                params=SearchParams(exact=True)))
                found += len({int(h.id) for h in hits} & set(np.argsort(-(x @ v))[:10].tolist()))
            shard.close()
            size = sum(os.lstat(os.path.join(a, f)).st_blocks * 512 for a, _, fs in os.walk(d) for f in fs
                       if "vector_storage" in a)
        out[name] = {"bytes_per_vector": round(size / args.points, 1),
                     "max_component_error": float(np.abs(back - x[:100]).max()), "recall_at_10": found / 200}
        if not args.json:
            print(name, out[name], flush=True)
    # the sparse vectors: 10-60 random term ids each, weights 0.1-3.1, the IDF modifier as shipped
    terms = [sorted(set(rng.integers(0, 2**20, int(rng.integers(10, 60))).tolist())) for _ in range(args.points)]
    weights = [(rng.random(len(t)) * 3 + 0.1).tolist() for t in terms]
    for name in ("sparse Float32", "sparse Float16", "sparse Uint8"):
        kind = getattr(VectorStorageDatatype, name.split()[1])
        with tempfile.TemporaryDirectory(prefix="gitrag-dt-sparse-") as d:
            shard = EdgeShard.create(d, EdgeConfig(
                vectors={}, wal_enabled=False, optimizers=EdgeOptimizersConfig(indexing_threshold=8_000, max_segment_size=16_000),
                sparse_vectors={"s": EdgeSparseVectorParams(modifier=Modifier.Idf, memory=Memory.Cold, datatype=kind)}))
            for i in range(0, args.points, 2000):
                shard.update(UpdateOperation.upsert_points(
                    [Point(j, {"s": SparseVector(terms[j], weights[j])}, {}) for j in range(i, min(i + 2000, args.points))]))
            shard.optimize()
            shard.flush()
            back = shard.retrieve([5], False, True)[0].vector["s"]
            shard.close()
            sizes = {"storage": 0, "index": 0}
            for a, _, fs in os.walk(d):
                part = "index" if "vector_index" in a else "storage" if "vector_storage" in a else ""
                if part:
                    sizes[part] += sum(os.lstat(os.path.join(a, f)).st_blocks * 512 for f in fs)
        out[name] = {"storage_bytes_per_point": round(sizes["storage"] / args.points, 1),
                     "index_bytes_per_point": round(sizes["index"] / args.points, 1),
                     "max_weight_error": max(abs(a - b) for a, b in zip(back.values, weights[5], strict=True))}
        if not args.json:
            print(name, out[name], flush=True)
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("disk", help="index trees from an empty home and measure every file and table")
    d.add_argument("--tree", action="append", required=True)
    d.add_argument("--code", default=None, help="a gitrag package folder to index with too (side by side)")
    r = sub.add_parser("report", help="measure an existing GITRAG_HOME")
    r.add_argument("--home", required=True)
    r.add_argument("--chunks", type=int, required=True)
    c = sub.add_parser("recall", help="bench_retrieval.py all float32, float16 cache vectors and as shipped")
    c.add_argument("--corpus", required=True)
    c.add_argument("--embedder", default="static")
    m = sub.add_parser("sync-memory", help="RSS of a first index in this process at every store flush")
    m.add_argument("--tree", action="append", required=True)
    s = sub.add_parser("sparse-cpu", help="CPU per chunk: a sparse vector computed again vs a cache's put and get")
    s.add_argument("--tree", action="append", required=True)
    s.add_argument("--chunks", type=int, default=10_000)
    pc = sub.add_parser("payload-cpu", help="bytes and read CPU of a state's payloads as objects and as arrays")
    pc.add_argument("--state", required=True)
    pc.add_argument("--runs", type=int, default=5)
    t = sub.add_parser("datatypes", help="the engine's dense storage datatypes: bytes, read-back error, recall@10")
    t.add_argument("--points", type=int, default=20_000)
    for p in (d, r, c, m, s, pc, t):
        p.add_argument("--json", action="store_true")
    args = ap.parse_args()
    return {"disk": disk, "report": report, "recall": recall, "sync-memory": sync_memory,
            "sparse-cpu": sparse_cpu, "payload-cpu": payload_cpu, "datatypes": datatypes}[args.cmd](args)

if __name__ == "__main__":
    sys.exit(main())
