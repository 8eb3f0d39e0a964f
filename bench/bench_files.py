"""File-level quality of ``ask --files`` on every shared question set: how a file's chunk
scores are aggregated into its rank, measured side by side in one run.

    python bench/bench_files.py --corpus DIR [--embedder NAME] [--json]

DIR holds the corpora of bench/eval/make_corpus.sh (``click``, ``fastapi``, ``flask``,
``requests``). For every question the chunk ranking is computed once (as ``ask --files``
does: ``max(k x CANDIDATES_PER_FILE, PREFETCH)`` chunks), then its files are ranked by
each aggregation rule of gitrag.query.file_results.file_score: ``max`` (the best chunk alone,
the rule before issue 20), and ``top N, d`` (the best plus the next N-1, the n-th x d^(n-1)).
A question is right at k when one of its target files is among the first k files
(Acc@k, as SWE-bench localisation papers count it); MRR@10 of the first target file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETS = [
    ("fastapi", "bench/eval/semble/fastapi.json", "fastapi"),
    ("flask", "bench/eval/semble/flask.json", "flask"),
    ("requests", "bench/eval/semble/requests.json", "requests"),
    ("click", "bench/eval/click-8.1.7.jsonl", "click"),
    ("click-long", "bench/eval/click-long.jsonl", "click"),
]
RULES = {"max": (1, 1.0), "top2 d0.5": (2, 0.5), "top3 d0.5": (3, 0.5), "top3 d0.25": (3, 0.25),
         "top5 d0.5": (5, 0.5), "sum top3": (3, 1.0)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="folder holding the click, fastapi, flask and requests corpora")
    ap.add_argument("--embedder", default=None, help="GITRAG_EMBEDDER for this run (default: the settings')")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = ap.parse_args()
    if args.embedder:
        os.environ["GITRAG_EMBEDDER"] = args.embedder

    from gitrag.index.indexer import Indexer
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import open_workspace
    from gitrag.query.evaluation import load_dataset
    from gitrag.query.file_results import CANDIDATES_PER_FILE, rank_files
    from gitrag.query.retrieval import PREFETCH, search
    from gitrag.surfaces import output

    k = 10
    table: dict[str, dict[str, float]] = {r: {} for r in RULES}
    for label, qfile, corpus in SETS:
        data = load_dataset(ROOT / qfile)
        ws = open_workspace(str(Path(args.corpus) / corpus))
        try:
            with output.progress_bar(False) as progress:
                Indexer(ws, progress).sync()
            flt = SearchFilter(path_prefix=data.scope) if data.scope else None
            hits: dict[str, list[int]] = {r: [] for r in RULES}  # rank of the first target file (0: none)
            for q in data.questions:
                chunks = search(ws, q.query, k=max(k * CANDIDATES_PER_FILE, PREFETCH), scope=flt, snippets=False)
                targets = {t.path for t in q.targets}
                for rule, (n, d) in RULES.items():
                    files = [f.path for f in rank_files(chunks, k, chunks=n, decay=d)]
                    rank = next((i for i, p in enumerate(files, 1) if _matches(p, targets, data.suffix_paths)), 0)
                    hits[rule].append(rank)
        finally:
            ws.close()
        for rule, ranks in hits.items():
            n = len(ranks)
            for at in (1, 3, 5):
                table[rule][f"{label} Acc@{at}"] = sum(1 for r in ranks if 0 < r <= at) / n
            table[rule][f"{label} MRR"] = sum(1 / r for r in ranks if r) / n
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    cols = list(next(iter(table.values())).keys())
    print("file-level: Acc@k = a target file among the first k files; MRR@10 of the first target file")
    print("| rule | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for rule, row in table.items():
        print(f"| {rule} | " + " | ".join(f"{row[c]:.3f}" for c in cols) + " |")
    return 0


def _matches(path: str, targets: set[str], suffix: bool) -> bool:
    if path in targets:
        return True
    return suffix and any(path.endswith("/" + t) or t.endswith("/" + path) for t in targets)


if __name__ == "__main__":
    raise SystemExit(main())
