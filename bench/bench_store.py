"""Benchmark the two store backends side by side on the same synthetic corpus.

    python bench/bench_store.py [--points 20000] [--dim 384] [--terms 30] [--queries 50]

Per backend: upsert time (batches of 256, as the indexer writes), flush time (for the
embedded store this runs the optimizer, which builds the HNSW index), hybrid RRF query
p50, filtered hybrid query p50 (path prefix + language), reopen time (open the store
again and count), and disk use. The server column is qdrant-client's local mode on disk
(``path:``), the stand-in the tests use, not a real Qdrant server.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gitrag.index.store import PointRecord, SearchFilter, SparseVec, Store
from gitrag.index.store.edge import EdgeStore
from gitrag.index.store.server import ServerStore

COLL = "bench"
BATCH = 256
VOCAB = 30_000


def corpus(n: int, dim: int, terms: int, rng: np.random.Generator) -> list[PointRecord]:
    """``n`` points: unit dense vectors, Zipf-like sparse terms, paths in 40 packages."""
    dense = rng.standard_normal((n, dim)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    p = 1.0 / np.arange(1, VOCAB + 1)
    draws = rng.choice(VOCAB, size=(n, terms), p=p / p.sum())
    records = []
    for i in range(n):
        idx, tf = np.unique(draws[i], return_counts=True)
        path = f"src/pkg{i % 40}/mod{i % 400}.{'py' if i % 3 else 'go'}"
        payload = {
            "path": path, "blob": f"{i:040x}", "start_byte": 0, "end_byte": 1200, "start_line": 1,
            "end_line": 40, "symbol": f"fn_{i}", "kind": "function",
            "language": "python" if i % 3 else "go", "chunk_hash": f"{i:064x}",
        }  # fmt: skip
        records.append(PointRecord(str(uuid.uuid4()), dense[i], SparseVec(idx.tolist(), tf.astype(float).tolist()), payload))
    return records


def queries(n: int, dim: int, rng: np.random.Generator) -> list[tuple[np.ndarray, SparseVec]]:
    out = []
    for _ in range(n):
        q = rng.standard_normal(dim).astype(np.float32)
        terms = sorted(set(rng.integers(0, 2_000, size=5).tolist()))
        out.append((q / np.linalg.norm(q), SparseVec(terms, [1.0] * len(terms))))
    return out


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def p50_ms(store: Store, qs: list[tuple[np.ndarray, SparseVec]], scope: SearchFilter | None) -> float:
    times = [timed(lambda d=d, s=s: store.search(COLL, dense=d, sparse=s, limit=10, scope=scope, branch=None)) for d, s in qs]
    return statistics.median(times) * 1000


def run(kind: str, folder: Path, points: list[PointRecord], qs: list[tuple[np.ndarray, SparseVec]]) -> dict[str, float]:
    """Every measurement for one backend, in seconds, milliseconds or MB as named."""
    def opener() -> Store:
        return EdgeStore(folder) if kind == "embedded" else ServerStore(f"path:{folder}")

    store = opener()
    store.create_collection(COLL, len(points[0].dense))
    upsert = timed(lambda: [store.upsert(COLL, points[i : i + BATCH]) for i in range(0, len(points), BATCH)])
    flush = timed(lambda: store.flush(COLL))
    hybrid = p50_ms(store, qs, None)
    filtered = p50_ms(store, qs, SearchFilter(path_prefix="src/pkg7/", language="python"))
    store.close()
    reopened: list[Store] = []
    reopen = timed(lambda: (reopened.append(opener()), reopened[0].count(COLL)))
    size_mb = reopened[0].size_bytes(COLL) / 1e6 if kind == "embedded" else _du(folder) / 1e6
    reopened[0].close()
    return {"upsert_s": upsert, "flush_s": flush, "hybrid_p50_ms": hybrid, "filtered_p50_ms": filtered,
            "reopen_s": reopen, "disk_mb": size_mb}  # fmt: skip


def _du(folder: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--terms", type=int, default=30)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--backends", default="embedded,server")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    points = corpus(args.points, args.dim, args.terms, rng)
    qs = queries(args.queries, args.dim, rng)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gitrag-bench-") as tmp:
        for kind in args.backends.split(","):
            results[kind] = run(kind, Path(tmp) / kind, points, qs)
            print(f"{kind}: done", flush=True)
    print(f"\n{args.points} points, {args.dim} dims, ~{args.terms} sparse terms, {args.queries} queries")
    kinds = list(results)
    print(f"{'':18}" + "".join(f"{k:>12}" for k in kinds) + ("   server/embedded" if len(kinds) == 2 else ""))
    for metric in results[kinds[0]]:
        row = [results[k][metric] for k in kinds]
        ratio = f"{row[1] / row[0]:>14.1f}x" if len(row) == 2 and row[0] > 0 else ""
        print(f"{metric:18}" + "".join(f"{v:>12.3f}" for v in row) + ratio)


if __name__ == "__main__":
    main()
