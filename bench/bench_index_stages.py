"""CPU per stage of a first index's per-file work, in one process (issue 21).

    PYTHONPATH=<code tree> python bench/bench_index_stages.py REPO [--under lib/] [--limit N]

Runs what a pool worker of ``gitrag index`` does for each file of REPO's HEAD
(gitrag/index/pool.py: read and judge the blob, chunk it (chunks and symbol graph), the
sparse vectors, the dense vectors from the chunks' token spans, pickling the result; the
point rows, ~2% of it, are left out)
with the bundled static embedder, and prints the CPU seconds of each stage
(``time.process_time``: the tokenizer's threads included), CPU ms per chunk and a SHA-256
digest over every output (chunks with their payload fields, graphs, float16 vectors,
sparse vectors).
Run it on two code trees alternately (``PYTHONPATH``, e.g. main via ``git archive``): equal
digests mean the same index, and the CPU figures of one run compare the two. Files over
1 MB are skipped (the default ``max_file_bytes``).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import time

import numpy as np

import gitrag
from gitrag.git.repo import GitRepo
from gitrag.index import sparse
from gitrag.index.chunking import analyze
from gitrag.index.embedders.base import embed_partial
from gitrag.index.embedders.static import StaticEmbedder
from gitrag.index.policy import content_reason
from gitrag.index.vector_cache import stored_form

try:  # the one-pass form (issue 21); a code tree from before it converts one vector at a time
    from gitrag.index.vector_cache import stored_forms
except ImportError:
    def stored_forms(matrix: np.ndarray) -> np.ndarray:
        return np.stack([stored_form(v) for v in matrix]) if len(matrix) else matrix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--under", default="", help="only paths starting with this")
    ap.add_argument("--limit", type=int, default=None, help="at most this many files")
    args = ap.parse_args()
    repo, emb = GitRepo(args.repo), StaticEmbedder()
    entries = [e for e in repo.files(repo.require_head()) if e.path.startswith(args.under)][: args.limit]
    stages = dict.fromkeys(("read", "analyze", "sparse", "embed", "pickle"), 0.0)
    digest, chunks = hashlib.sha256(), 0
    emb.embed_documents(["warm up"])  # the tokenizer and vectors load outside the figures
    for e in entries:
        t0 = time.process_time()
        data = repo.read_blob(e.blob)
        reason = "too big" if len(data) > 1_000_000 else content_reason(data, e.path, False)
        t1 = time.process_time()
        stages["read"] += t1 - t0
        if reason:
            continue
        analysis = analyze(e.path, data, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens)
        t2 = t3 = time.process_time()
        rows = [c for c in analysis.chunks if c.embeddable]
        graph = (analysis.language, analysis.definitions, analysis.references)
        texts = {c.hash: c.text for c in analysis.chunks if c.embeddable}
        spans = {c.hash: c.span for c in analysis.chunks if c.embeddable and c.span is not None}
        sparse_vecs = {h: sparse.document_vector(t) for h, t in texts.items()}
        t4 = time.process_time()
        hashes = list(texts)
        vecs, _ = embed_partial(emb, [texts[h] for h in hashes], [spans.get(h) for h in hashes])
        forms = stored_forms(vecs)  # as pool.process: the file's vectors as the cache keeps them
        dense = {h: forms[j] for j, h in enumerate(hashes)}
        t5 = time.process_time()
        pickle.dumps((rows, graph, texts, dense, sparse_vecs))
        t6 = time.process_time()
        for name, took in zip(("analyze", "sparse", "embed", "pickle"), (t2 - t1, t4 - t3, t5 - t4, t6 - t5)):
            stages[name] += took
        chunks += len(rows)
        digest.update(e.path.encode())
        for c in rows:
            digest.update(repr((c.hash, c.start_byte, c.end_byte, c.start_line, c.end_line, c.symbol, c.kind,
                                c.language, c.prose, c.roles)).encode())
        digest.update(repr(graph).encode())
        for h in hashes:
            digest.update(h.encode() + np.asarray(dense[h]).tobytes())
            digest.update(repr((sparse_vecs[h].indices, sparse_vecs[h].values)).encode())
    total = sum(stages.values())
    print(f"code {gitrag.__file__.rsplit('/gitrag/', 1)[0]}  files {len(entries)}  chunks {chunks}  CPU s {total:.2f}  "
          f"ms/chunk {1000 * total / max(chunks, 1):.3f}  " + " ".join(f"{k}={v:.2f}" for k, v in stages.items())
          + f"  digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
