"""The deep fusion lists with and without payloads, side by side on one index.

    python bench/bench_deep_lists.py [--corpus DIR] [--files N] [--server] [--long N] [--reps N]

Hybrid ranking reads the dense and the sparse list ``SCORE_DEPTH`` (300) deep for their
scores but needs payloads only for each list's top ``PREFETCH`` (50), its candidates.
This indexes the corpus (default: the standard library's first N files, as bench_index.py
builds it) with the default static embedder in a temporary GITRAG_HOME, in the embedded
store or, with ``--server``, in qdrant-client's local mode on disk (the tests' stand-in for
a server: slow beyond ~20k points, so use a smaller corpus there). Then, for every question
of the click set and ``--long`` 20 KB questions (made as bench_query.py makes them), it
times the store requests of one ranking, the three ways interleaved per question, ``--reps``
rounds:

- ``full``: both lists 300 deep with payloads (gitrag before payloads were skipped);
- ``two``: each list twice, its top 50 with payloads and 300 deep without;
- ``by id``: both lists 300 deep without payloads, then the payloads of the candidates
  (each list's top 50) in one request by id (what gitrag.query.retrieval does).

Prints p50/p95 in ms per way, its p50 over ``full``'s, and how many runs did not give
``full``'s hits (ids and scores; in local mode, scores to 1e-12: its numpy cosines can
differ in the last bit between two identical calls) and candidates' payloads. ``two`` is
not always identical: hits tied at the 50th place can be other points in a 50-deep list
than in the top 50 of a 300-deep one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_index import build_corpus  # noqa: E402 - found through the sys.path line above
from bench_query import QUESTIONS, long_questions, pct  # noqa: E402 - found through the sys.path line above

Lists = tuple[list, list, dict]  # dense hits, sparse hits, {candidate id: payload}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--server", action="store_true", help="qdrant-client's local mode instead of the embedded store")
    ap.add_argument("--long", type=int, default=10, help="also time this many 20 KB questions")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gitrag-bench-deep-"))
    os.environ["GITRAG_HOME"] = str(work / "home")
    os.environ.setdefault("GITRAG_EMBEDDER", "static")
    if args.server:
        os.environ["GITRAG_QDRANT_URL"] = f"path:{work / 'qdrant-local'}"
    else:
        os.environ.pop("GITRAG_QDRANT_URL", None)
    corpus = args.corpus.resolve() if args.corpus else build_corpus(work / "corpus", args.files)
    subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(corpus), "--json"], check=True,
                   stdout=subprocess.DEVNULL)

    from gitrag.index import sparse
    from gitrag.index.workspace import open_workspace
    from gitrag.query import ranking
    from gitrag.query.retrieval import PREFETCH, SCORE_DEPTH

    ws = open_workspace(corpus)
    row = ws.state.branch(ws.repo.branch())
    store, coll, view = ws.store, row.collection, row.view

    def deep(dense, terms, with_payload: bool) -> tuple[list, list]:
        return (store.search(coll, dense=dense, sparse=None, limit=SCORE_DEPTH, branch=view, with_payload=with_payload),
                store.search(coll, dense=None, sparse=terms, limit=SCORE_DEPTH, branch=view, with_payload=with_payload))

    def top_ids(d: list, s: list) -> list[str]:
        return list(dict.fromkeys(h.id for h in d[:PREFETCH] + s[:PREFETCH]))

    def full(dense, terms) -> Lists:
        d, s = deep(dense, terms, True)
        return d, s, {h.id: h.payload for h in d[:PREFETCH] + s[:PREFETCH]}

    def two(dense, terms) -> Lists:
        d_top = store.search(coll, dense=dense, sparse=None, limit=PREFETCH, branch=view)
        s_top = store.search(coll, dense=None, sparse=terms, limit=PREFETCH, branch=view)
        d, s = deep(dense, terms, False)
        return d, s, {h.id: h.payload for h in d_top + s_top}

    def by_id(dense, terms) -> Lists:
        d, s = deep(dense, terms, False)
        return d, s, store.payloads(coll, top_ids(d, s))

    ways: dict[str, Callable[..., Lists]] = {"full": full, "two": two, "by id": by_id}
    click = [json.loads(line)["query"] for line in QUESTIONS.read_text().splitlines() if line.strip()]
    n = store.count(coll, view)
    print(f"corpus: {corpus.name}, {n} points, {store.kind} store; lists {SCORE_DEPTH} deep, candidates: top {PREFETCH}")
    for label, questions in (("click questions", click), ("20 KB questions", long_questions(args.long))):
        if not questions:
            continue
        vectors = []
        for q in questions:
            query = ranking.analyse(q)
            vectors.append((ws.embedder.embed_query(query.dense_text), sparse.query_vector(q, query.term_weights)))
        times: dict[str, list[float]] = {name: [] for name in ways}
        differ: dict[str, int] = dict.fromkeys(ways, 0)
        for _ in range(args.reps):
            for dense, terms in vectors:
                got = {}
                for name, way in ways.items():
                    t = time.perf_counter()
                    got[name] = way(dense, terms)
                    times[name].append((time.perf_counter() - t) * 1000)
                for name in differ:
                    differ[name] += not same(got[name], got["full"], exact=store.kind == "embedded")
        base = statistics.median(times["full"])
        for name, ms in times.items():
            print(f"{label:16s} {name:6s}: p50 {statistics.median(ms):7.2f} ms  p95 {pct(ms, 0.95):7.2f} ms  "
                  f"{statistics.median(ms) / base:.2f}x full  ({len(ms)} runs, {differ[name]} not identical to full)")
    ws.close()
    shutil.rmtree(work, ignore_errors=True)
    return 0


def same(got: Lists, ref: Lists, exact: bool) -> bool:
    """``got`` holds ``ref``'s hits (ids and scores) and candidates' payloads."""
    for mine, theirs in ((got[0], ref[0]), (got[1], ref[1])):
        if exact:
            if [(h.id, h.score) for h in mine] != [(h.id, h.score) for h in theirs]:
                return False
            continue
        score_of = {h.id: h.score for h in theirs}  # hits within 1e-12 of each other may swap places
        if len(mine) != len(theirs) or not all(
                h.id in score_of and abs(h.score - score_of[h.id]) <= 1e-12 * max(1.0, abs(h.score)) for h in mine):
            return False
    return got[2] == ref[2]


if __name__ == "__main__":
    sys.exit(main())
