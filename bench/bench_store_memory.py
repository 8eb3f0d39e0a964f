"""Peak memory, disk and query cost of the embedded store at scale, per store layout (issue 21).

    python bench/bench_store_memory.py [--points 500000] [--layouts current,lean] [--queries 30]

Each layout runs in a child process of its own (so its peak RSS is its own): N points with
gitrag's payload fields (path, blob, byte and line ranges, symbol, kind, language, chunk
hash, branches, hidden), a 256-dim unit dense vector rounded to float16 (as the vector cache
stores it) and a 24-entry sparse vector each, written through gitrag's EdgeStore in batches
of 256 as a sync writes them, then one ``optimize`` as a sync ends. Printed per layout: CPU s
of the writes and of the optimize, the process's peak RSS (VmHWM) after the writes and after
the optimize, its RSS then, disk MB (allocated) and bytes per point, the dense query's CPU
ms median (300 deep, ids and scores, filtered on the branch view: gitrag's dense list), and
the overlap of each layout's top 10 / top 300 with the first layout's (the same questions).

Layouts (``gitrag.index.store.edge.Layout``):

- ``current``: the layout before this change (float32 vectors in RAM, HNSW graph above
  100,000 KB of vectors, payload and id tracker as the engine defaults);
- ``lean``: what gitrag ships now (``edge.LAYOUT``);
- ``f16``, ``f16cold``, ``noindex``, ``coldall``: the steps measured on the way (see ``trial``).

CPU is the figure to read on a shared machine; RSS and disk are exact.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DIM = 256
TAG = "0123456789ab"


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
    return total


def child(layout: str, n: int, queries: int, out: Path) -> None:
    from qdrant_edge import Memory, VectorStorageDatatype

    from gitrag.index.store import PointRecord, SparseVec
    from gitrag.index.store import edge as edge_mod
    from gitrag.index.store.edge import EdgeStore

    trial = {  # layouts measured on the way to ``lean`` (BENCHMARKS.md)
        "f16": edge_mod.Layout(datatype=VectorStorageDatatype.Float16),
        "f16cold": edge_mod.Layout(datatype=VectorStorageDatatype.Float16, vectors=Memory.Cold),
        "noindex": edge_mod.Layout(indexing_threshold_kb=10**9),
        "coldall": edge_mod.Layout(datatype=VectorStorageDatatype.Float16, vectors=Memory.Cold,
                                   payload=Memory.Cold, sparse=Memory.Cold, indexing_threshold_kb=10**9),
    }
    lean = edge_mod.LAYOUTS["lean"]
    trial.update({
        "lean-sparseram": lean._replace(sparse=Memory.Cached),
        "lean-once": lean._replace(optimize_every=0),
        "lean-payram": lean._replace(payload=None),
        "lean-graph": lean._replace(hnsw=None, exact=False),
        "lean2": lean,
        # the first try: sealed every 32,768 points but merged up to 200 MB, indexes and id tracker in RAM
        "lean-first": lean._replace(max_segment_kb=200_000, indexing_threshold_kb=20_000, optimize_every=32_768,
                                    indexes=None, id_tracker=None),
        "lean-bigseg": lean._replace(indexing_threshold_kb=10**9, optimize_every=0),
        "lean-1thread": lean._replace(hnsw=edge_mod.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10**9,
                                                                    payload_m=0, max_indexing_threads=1)),
    })
    edge_mod.LAYOUT = {**trial, **edge_mod.LAYOUTS}[layout]
    rng = np.random.default_rng(21)
    qs = rng.standard_normal((queries, DIM)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        store = EdgeStore(Path(tmp))
        name = "gbench_00000000"
        store.create_collection(name, DIM)
        c0 = time.process_time()
        batch = 256
        for start in range(0, n, batch):
            m = min(batch, n - start)
            vecs = rng.standard_normal((m, DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs.astype(np.float16).astype(np.float32)
            points = []
            for i in range(m):
                k = start + i
                idx = sorted(set(int(x) for x in rng.integers(0, 2**20, 24)))
                points.append(PointRecord(
                    f"00000000-0000-4000-8000-{k:012d}", vecs[i], SparseVec(idx, [1.0] * len(idx)),
                    {"path": f"copy{k % 11}/pkg/mod{k % 4001}.py", "blob": f"{k * 2654435761 % 2**160:040x}",
                     "start_byte": k % 9000, "end_byte": k % 9000 + 700, "start_line": k % 300,
                     "end_line": k % 300 + 25, "symbol": f"Class{k % 777}.method{k % 13}", "kind": "function",
                     "language": "python", "chunk_hash": f"{k * 40503 % 2**256:064x}", "branches": [TAG],
                     "hidden": []}))
            store.upsert(name, points)
            if (start // batch) % 8 == 7:  # a sync flushes each batch of 2,048 points
                store.flush(name)
        store.flush(name)
        write_cpu = time.process_time() - c0
        hwm_write = _status("VmHWM")
        c0 = time.process_time()
        store.optimize(name)
        opt_cpu = time.process_time() - c0
        hwm_opt = _status("VmHWM")
        rss_after = _status("VmRSS")
        disk = _du(Path(tmp))
        cpu, lists = [], []
        for q in qs:
            c0 = time.process_time()
            hits = store.search(name, dense=q, sparse=None, limit=300, branch=TAG, with_payload=False)
            cpu.append(1000 * (time.process_time() - c0))
            lists.append([h.id for h in hits])
        store.close()
    out.write_text(json.dumps({
        "layout": layout, "points": n, "write_cpu_s": write_cpu, "optimize_cpu_s": opt_cpu,
        "hwm_write_mb": hwm_write, "hwm_optimize_mb": hwm_opt, "rss_after_mb": rss_after,
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "disk_mb": disk / 2**20,
        "bytes_per_point": disk / n, "query_cpu_ms_p50": statistics.median(cpu), "lists": lists}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=500_000)
    ap.add_argument("--layouts", default="current,lean")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--child", nargs=3, metavar=("LAYOUT", "N", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.queries, Path(args.child[2]))
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for layout in args.layouts.split(","):
            out = Path(tmp) / f"{layout}.json"
            load = os.getloadavg()[0]
            subprocess.run([sys.executable, __file__, "--queries", str(args.queries), "--child", layout,
                            str(args.points), str(out)], check=True)
            r = json.loads(out.read_text())
            r["load"] = load
            results.append(r)
            ref = results[0]["lists"]
            r10 = statistics.mean(len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(ref, r["lists"]))
            r300 = statistics.mean(len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(ref, r["lists"]))
            print(f"{layout:>8} points {r['points']:,} load {load:.1f}: write CPU {r['write_cpu_s']:.1f} s, "
                  f"optimize CPU {r['optimize_cpu_s']:.1f} s, peak RSS after writes {r['hwm_write_mb']:.0f} MB, "
                  f"after optimize {r['hwm_optimize_mb']:.0f} MB, RSS then {r['rss_after_mb']:.0f} MB, "
                  f"disk {r['disk_mb']:.0f} MB ({r['bytes_per_point']:.0f} B/point), query CPU p50 "
                  f"{r['query_cpu_ms_p50']:.1f} ms, top-10 / top-300 overlap with {results[0]['layout']} "
                  f"{r10:.3f} / {r300:.3f}", flush=True)


if __name__ == "__main__":
    main()
