"""Merging pieces of one definition into one result: retrieval quality without and with it.

For each question set, every question is searched once per mode (20 results, no merge);
the "off" arm scores the top 10 of that list, the "on" arm scores the top 10 after
:func:`gitrag.query.ranking.pieces.merge_pieces`. Both arms see the very same ranked list, so
the only difference is the merge (score ties are not broken differently between arms).

    python bench/bench_pieces.py QUESTIONS REPO [QUESTIONS REPO ...] [--mode hybrid --mode sparse]

The embedder is the configured one (``GITRAG_EMBEDDER=hash`` for a fast run); each
repository is indexed first (incrementally) under ``GITRAG_HOME``.
"""

from __future__ import annotations

import argparse
import copy
from typing import Any

from gitrag.index.indexer import Indexer
from gitrag.index.store import SearchFilter
from gitrag.index.workspace import Workspace, open_workspace
from gitrag.query.evaluation import load_dataset, run_dataset
from gitrag.query.ranking.pieces import merge_pieces
from gitrag.query.retrieval import Result, search

DEPTH = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", metavar="QUESTIONS REPO")
    parser.add_argument("--mode", dest="modes", action="append", choices=["hybrid", "dense", "sparse"])
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give QUESTIONS REPO pairs")
    modes = args.modes or ["hybrid", "sparse"]
    for questions, repo in zip(args.pairs[::2], args.pairs[1::2]):
        data = load_dataset(questions)
        ws = open_workspace(repo)
        try:
            Indexer(ws).sync()
            scope = SearchFilter(path_prefix=data.scope) if data.scope else None
            cache: dict[tuple[str, str], list[Result]] = {}

            def run(query: str, mode: str, merge: bool, cache: dict[tuple[str, str], list[Result]] = cache,
                    ws: Workspace = ws, scope: SearchFilter | None = scope) -> list[Result]:  # this dataset's
                if (mode, query) not in cache:
                    cache[(mode, query)] = search(ws, query, k=2 * DEPTH, mode=mode, scope=scope,
                                                  snippets=False, merge=False)
                ranked = copy.deepcopy(cache[(mode, query)])
                return (merge_pieces(ranked) if merge else ranked)[:DEPTH]

            searchers: dict[str, Any] = {}
            for mode in modes:
                for merge in (False, True):
                    searchers[f"{mode} {'on' if merge else 'off'}"] = (
                        lambda q, m=mode, on=merge: run(q, m, on))
            report = run_dataset(data, searchers, DEPTH).to_json()
        finally:
            ws.close()
        print(f"{data.name} ({report['questions']} questions)")
        for name, mode_report in report["modes"].items():
            o = mode_report["overall"]
            print(f"  {name:11s} " + "  ".join(f"{k} {v:.3f}" for k, v in o.items()))


if __name__ == "__main__":
    main()
