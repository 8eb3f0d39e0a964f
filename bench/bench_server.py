"""Measure a Qdrant server as a team's index (docs/team.md): upserts and gitrag's queries
through qdrant-client, against whatever address it is given, side by side with the
embedded engine (Qdrant Edge) on the same synthetic corpus in the same run.

    python bench/bench_server.py --url http://localhost:6333 [--api-key KEY] [--ca-cert ca.pem]
    python bench/bench_server.py --url path:/tmp/qdrant-local      # qdrant-client local mode
    python bench/bench_server.py --url :memory: --points 5000

Per backend: upsert throughput (batches of 512, as a publish writes), and the queries one
``gitrag ask`` makes, each filtered on a branch view (``branches`` payload): the dense and
the sparse list read 300 deep without payloads, the candidates' payloads by id (100), and a
hybrid RRF query with payloads; p50 and p95 over ``--queries`` questions. The last column is
server / embedded (the ratio is the figure to compare across machines: timings on a shared
machine are noisy). A collection ``gitrag_bench_<random>`` is created on the server and
dropped at the end. Nothing is sent anywhere but ``--url``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import corpus, queries

from gitrag.index.store import PointRecord, Store
from gitrag.index.store.edge import EdgeStore
from gitrag.index.store.server import ServerStore

TAG = "a1b2c3d4e5f6"  # a branch tag, as gitrag.index.state.branch_tag makes them
DEPTH = 300  # gitrag.query.retrieval.SCORE_DEPTH
CANDIDATES = 100


def _ms(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1000, s[min(len(s) - 1, int(0.95 * len(s)))] * 1000


def run(store: Store, name: str, points: list[PointRecord], qs: list, dim: int, batch: int) -> dict[str, object]:
    out: dict[str, object] = {}
    store.create_collection(name, dim)
    t0 = time.perf_counter()
    for i in range(0, len(points), batch):
        store.upsert(name, points[i : i + batch])
    store.flush(name)
    out["upsert points/s"] = len(points) / (time.perf_counter() - t0)
    ids = [p.id for p in points]
    timings: dict[str, list[float]] = {"dense 300, no payload": [], "sparse 300, no payload": [],
                                       f"payloads of {CANDIDATES}": [], "hybrid RRF 10": []}
    for j, (dense, sparse) in enumerate(qs):
        calls: list[tuple[str, Callable[[], object]]] = [
            ("dense 300, no payload", partial(store.search, name, dense=dense, sparse=None, limit=DEPTH, branch=TAG,
                                              with_payload=False)),
            ("sparse 300, no payload", partial(store.search, name, dense=None, sparse=sparse, limit=DEPTH, branch=TAG,
                                               with_payload=False)),
            (f"payloads of {CANDIDATES}", partial(store.payloads, name, ids[j : j + CANDIDATES])),
            ("hybrid RRF 10", partial(store.search, name, dense=dense, sparse=sparse, limit=10, branch=TAG)),
        ]
        for label, call in calls:
            t = time.perf_counter()
            call()
            timings[label].append(time.perf_counter() - t)
    for label, samples in timings.items():
        out[label] = _ms(samples)
    store.drop_collection(name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="http(s)://host:port of a Qdrant server, path:DIR or :memory:")
    ap.add_argument("--api-key", default="", help="the server's API key (else none)")
    ap.add_argument("--ca-cert", default="", help="PEM bundle to verify the server's TLS certificate with")
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=256, help="256: the default static embedder's")
    ap.add_argument("--terms", type=int, default=30)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--no-embedded", action="store_true", help="measure the server only")
    args = ap.parse_args()
    import numpy as np

    rng = np.random.default_rng(7)
    points = [replace(p, payload={**p.payload, "branches": [TAG], "hidden": []})
              for p in corpus(args.points, args.dim, args.terms, rng)]
    qs = queries(args.queries, args.dim, rng)
    name = f"gitrag_bench_{uuid.uuid4().hex[:8]}"
    server = ServerStore(args.url, api_key=args.api_key or None, ca_cert=args.ca_cert or None, timeout=60)
    try:
        got = {"server": run(server, name, points, qs, args.dim, args.batch)}
    finally:
        server.close()
    if not args.no_embedded:
        with tempfile.TemporaryDirectory() as tmp:
            edge = EdgeStore(Path(tmp))
            try:
                got["embedded"] = run(edge, name, points, qs, args.dim, args.batch)
            finally:
                edge.close()
    print(f"# {args.points} points, dim {args.dim}, {args.queries} queries; server: {args.url}")
    cols = list(got)
    print("| measure | " + " | ".join(cols) + (" | server / embedded |" if len(cols) == 2 else " |"))
    print("|---" * (len(cols) + 1 + (len(cols) == 2)) + "|")
    for key in got["server"]:
        vals = [got[c][key] for c in cols]
        if key == "upsert points/s":
            cells = [f"{v:,.0f}" for v in vals]
            ratio = f"{vals[1] / vals[0]:.1f}x slower" if len(vals) == 2 else ""
        else:
            cells = [f"{v[0]:.2f} ms (p95 {v[1]:.2f})" for v in vals]
            ratio = f"{vals[0][0] / vals[1][0]:.1f}x" if len(vals) == 2 else ""
        print(f"| {key} | " + " | ".join(cells) + (f" | {ratio} |" if len(cols) == 2 else " |"))


if __name__ == "__main__":
    main()
