"""Query CPU of the embedded store, old layout against the shipped one, interleaved in one process (issue 21).

    python bench/bench_store_query.py N

Two collections of the same N random 256-dim unit vectors with 40-term sparse vectors and
gitrag's filtered fields, one per layout (``current``: float32 in RAM; ``lean``: float16,
memory-mapped, exact scan: gitrag.index.store.edge.LAYOUTS), written as a sync writes them
and optimized once; then 40 questions, each asked of both in turn: the dense list (300
deep), the sparse list and the hybrid (RRF of both, 40 deep), filtered on a branch view.
Printed: the median ``time.process_time`` ms per kind and layout (CPU: the figure to read
on a shared machine).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gitrag.index.store import PointRecord, SparseVec
from gitrag.index.store import edge as edge_mod
from gitrag.index.store.edge import EdgeStore

N = int(sys.argv[1])
DIM = 256
TAG = "0123456789ab"
rng = np.random.default_rng(3)
vec = rng.standard_normal((N, DIM)).astype(np.float32)
vec /= np.linalg.norm(vec, axis=1, keepdims=True)
terms = [sorted(set(int(x) for x in rng.integers(0, 5000, 40))) for _ in range(N)]
stores = {}
tmp = tempfile.mkdtemp()
for lay in ("current", "lean"):
    edge_mod.LAYOUT = edge_mod.LAYOUTS[lay]
    st = EdgeStore(Path(tmp) / lay)
    st.create_collection("gq_1", DIM)
    for s0 in range(0, N, 256):
        st.upsert(
            "gq_1",
            [
                PointRecord(
                    f"00000000-0000-4000-8000-{k:012d}",
                    vec[k],
                    SparseVec(terms[k], [1.0] * len(terms[k])),
                    {"path": f"p{k % 997}.py", "language": "python", "symbol": "f", "branches": [TAG], "hidden": []},
                )
                for k in range(s0, min(N, s0 + 256))
            ],
        )
        if (s0 // 256) % 8 == 7:
            st.flush("gq_1")
    st.flush("gq_1")
    st.optimize("gq_1")
    stores[lay] = st
qs = rng.standard_normal((40, DIM)).astype(np.float32)
res = {lay: {"dense": [], "hybrid": [], "sparse": []} for lay in stores}
for q in qs:
    sq = SparseVec(sorted(set(int(x) for x in rng.integers(0, 5000, 6))), [1.0] * 6)
    for lay, st in stores.items():
        edge_mod.LAYOUT = edge_mod.LAYOUTS[lay]
        for kind, args in (
            ("dense", dict(dense=q, sparse=None)),
            ("sparse", dict(dense=None, sparse=sq)),
            ("hybrid", dict(dense=q, sparse=sq)),
        ):
            c0 = time.process_time()
            st.search("gq_1", limit=300 if kind == "dense" else 40, branch=TAG, with_payload=False, **args)
            res[lay][kind].append(1000 * (time.process_time() - c0))
for lay in res:
    print(N, lay, {k: round(statistics.median(v), 2) for k, v in res[lay].items()})
