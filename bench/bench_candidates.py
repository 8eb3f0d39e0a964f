"""Candidate recall: where each question's target sits in the dense list and in the sparse list.

    python bench/bench_candidates.py --corpus DIR [--embedder NAME] [--only SET] [--per-question KIND]

The ranking (gitrag.query.ranking) can only order what the two store queries return (PREFETCH
each). For every question of the shared sets (the corpora of bench/eval/make_corpus.sh),
this asks the store for the dense list and the sparse list ``DEPTH`` deep, as hybrid
search does, and prints per set and question kind the share of questions whose first
target is within the top 10 / 50 / 100 / 200 of each list, next to the hybrid MRR@10.
``--per-question KIND`` also prints each question of that kind: its dense rank, sparse
rank and hybrid rank ("-": not found that deep). A target missing from both lists' top
``PREFETCH`` is a recall problem; one in a list's top 10 but ranked low by hybrid is a
ranking problem.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETS = [("fastapi", "bench/eval/semble/fastapi.json", "fastapi"), ("flask", "bench/eval/semble/flask.json", "flask"),
        ("requests", "bench/eval/semble/requests.json", "requests"), ("click", "bench/eval/click-8.1.7.jsonl", "click")]
DEPTH = 200
CUTS = (10, 50, 100, 200)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="folder holding the click, fastapi, flask and requests corpora")
    ap.add_argument("--embedder", default=None, help="GITRAG_EMBEDDER for this run (default: the settings')")
    ap.add_argument("--only", action="append", default=[], help="run only these sets (repeatable)")
    ap.add_argument("--per-question", default="", metavar="KIND", help="print each question of this kind")
    args = ap.parse_args()
    if args.embedder:
        os.environ["GITRAG_EMBEDDER"] = args.embedder

    from gitrag.index import sparse
    from gitrag.index.indexer import Indexer
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import open_workspace
    from gitrag.query import ranking
    from gitrag.query.evaluation import load_dataset
    from gitrag.query.evaluation.metrics import hits
    from gitrag.query.retrieval import search
    from gitrag.surfaces import output

    def first_rank(located, question, suffix):
        return next((i for i, r in enumerate(located, 1) if any(hits(r, t, suffix_paths=suffix) for t in question.targets)),
                    None)

    print(f"| set | kind | n | dense R@{'/'.join(map(str, CUTS))} | sparse R@{'/'.join(map(str, CUTS))} | hybrid MRR@10 |")
    print("|---|---|---|---|---|---|")
    lines = []
    for label, qfile, corpus in SETS:
        if args.only and label not in args.only:
            continue
        data = load_dataset(ROOT / qfile)
        ws = open_workspace(str(Path(args.corpus) / corpus))
        try:
            with output.progress_bar(False) as progress:
                Indexer(ws, progress).sync()
            flt = SearchFilter(path_prefix=data.scope) if data.scope else None
            branch = ws.state.branch(ws.repo.branch())
            suffix = data.suffix_paths
            rows = []
            for q in data.questions:
                query = ranking.analyse(q.query)
                dense = ws.embedder.embed_query(query.dense_text)
                terms = sparse.query_vector(q.query, query.term_weights)
                dl = ws.store.search(branch.collection, dense=dense, sparse=None, limit=DEPTH, scope=flt,
                                     branch=branch.view)
                sl = ws.store.search(branch.collection, dense=None, sparse=terms, limit=DEPTH, scope=flt,
                                     branch=branch.view) if terms.indices else []
                spans = [_Span(h.payload) for h in dl], [_Span(h.payload) for h in sl]
                hybrid = search(ws, q.query, k=10, scope=flt, snippets=False)
                rows.append((q, first_rank(spans[0], q, suffix), first_rank(spans[1], q, suffix),
                             first_rank(hybrid, q, suffix)))
        finally:
            ws.close()
        for kind in sorted({q.kind for q, *_ in rows}):
            sub = [r for r in rows if r[0].kind == kind]

            def rec(col: int, sub: list = sub) -> str:
                return "/".join(f"{sum(1 for r in sub if r[col] is not None and r[col] <= c) / len(sub):.2f}" for c in CUTS)

            mrr = sum(1 / r[3] for r in sub if r[3]) / len(sub)
            print(f"| {label} | {kind} | {len(sub)} | {rec(1)} | {rec(2)} | {mrr:.3f} |")
            if kind == args.per_question:
                lines += [f"{label}\t{q.id}\t{_s(d)}\t{_s(s)}\t{_s(h)}\t{q.query[:90]}" for q, d, s, h in sub]
    if lines:
        print("\nset\tquestion\tdense\tsparse\thybrid\ttext")
        print("\n".join(lines))
    return 0


class _Span:
    def __init__(self, payload: dict) -> None:
        self.path, self.start_line, self.end_line = payload["path"], payload["start_line"], payload["end_line"]


def _s(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


if __name__ == "__main__":
    raise SystemExit(main())
