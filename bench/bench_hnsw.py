"""Exact scan against an HNSW graph in Qdrant Edge: where is the crossover (issue 21)?

    python bench/bench_hnsw.py [--sizes 25000,50000,100000,200000] [--queries 40]

For each size N, two collections of the same N random unit vectors (256 dimensions, the
default model's) with gitrag's payload fields, made through gitrag's own EdgeStore: one
never indexed (``INDEXING_THRESHOLD_KB`` above its size: an exact scan), one indexed from
the first KB (an HNSW graph built by ``optimize``). Each answers the same questions as
gitrag's dense list does (300 deep, ids and scores only, filtered on a branch view). Printed
per size: the build CPU s of the graph, the query CPU ms (median; ``time.process_time``,
every thread of the process), the wall ms median, and the HNSW list's recall@10 and
recall@300 against the exact one. CPU is the figure to read on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from gitrag.index.store import PointRecord, SparseVec
from gitrag.index.store import edge as edge_mod
from gitrag.index.store.edge import EdgeStore

DIM = 256
TAG = "0123456789ab"


def build(root: Path, name: str, vectors: np.ndarray, threshold_kb: int) -> tuple[EdgeStore, float]:
    # the old layout (float32 in RAM, graph above the threshold): the shipped one builds no graph
    edge_mod.LAYOUT = edge_mod.LAYOUTS["current"]._replace(indexing_threshold_kb=threshold_kb)
    store = EdgeStore(root)
    store.create_collection(name, DIM)
    for start in range(0, len(vectors), 1000):
        part = vectors[start : start + 1000]
        store.upsert(name, [PointRecord(f"00000000-0000-4000-8000-{start + i:012d}", v, SparseVec([1], [1.0]),
                                        {"path": f"p{(start + i) % 997}.py", "branches": [TAG], "hidden": []})
                            for i, v in enumerate(part)])
    store.flush(name)
    c0 = time.process_time()
    store.optimize(name)
    return store, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="25000,50000,100000,200000")
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    rng = np.random.default_rng(21)
    print(f"{'points':>8} {'graph build CPU s':>18} {'exact CPU ms':>13} {'hnsw CPU ms':>12} {'exact wall':>11}"
          f" {'hnsw wall':>10} {'recall@10':>10} {'recall@300':>11}")
    for n in (int(x) for x in args.sizes.split(",")):
        vectors = rng.standard_normal((n, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        queries = rng.standard_normal((args.queries, DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        with tempfile.TemporaryDirectory() as tmp:
            exact, _ = build(Path(tmp) / "exact", "gexact_00000000", vectors, 10**9)
            hnsw, build_cpu = build(Path(tmp) / "hnsw", "ghnsw_00000000", vectors, 1)
            out: dict[str, list[tuple[float, float, list[str]]]] = {"exact": [], "hnsw": []}
            for q in queries:
                for label, store, name in (("exact", exact, "gexact_00000000"), ("hnsw", hnsw, "ghnsw_00000000")):
                    c0, t0 = time.process_time(), time.perf_counter()
                    hits = store.search(name, dense=q, sparse=None, limit=300, branch=TAG, with_payload=False)
                    out[label].append((1000 * (time.process_time() - c0), 1000 * (time.perf_counter() - t0),
                                       [h.id for h in hits]))
            r10 = statistics.mean(len(set(a[2][:10]) & set(b[2][:10])) / 10 for a, b in zip(out["exact"], out["hnsw"]))
            r300 = statistics.mean(len(set(a[2]) & set(b[2])) / 300 for a, b in zip(out["exact"], out["hnsw"]))
            med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in out.items()}
            print(f"{n:>8} {build_cpu:>18.1f} {med['exact'][0]:>13.1f} {med['hnsw'][0]:>12.1f} {med['exact'][1]:>11.1f}"
                  f" {med['hnsw'][1]:>10.1f} {r10:>10.3f} {r300:>11.3f}", flush=True)
            exact.close()
            hnsw.close()


if __name__ == "__main__":
    main()
