"""Retrieval quality of the ranking pipeline and of each stage, on every shared question set, in one run.

    python bench/bench_retrieval.py --corpus DIR [--embedder NAME] [--json]

DIR holds the corpora built by bench/eval/make_corpus.sh (``click``, ``fastapi``, ``flask``,
``requests``). Each corpus is indexed (incrementally: with a warm GITRAG_HOME only the
questions are embedded), then every question set runs under: full hybrid ranking, hybrid
with each stage of gitrag.query.ranking.STAGES switched off, and the store's plain RRF fusion
(``rrf``, no ranking). One table: per variant, nDCG@10 of the three semble sets and their
mean, click MRR@10 overall and per kind, click identifier Recall@5, the long-question set
(bench/eval/click-long.jsonl) Recall@5 of the file a fix changes and MRR@10, and the
per-question latency p50 in ms (in-process, warm model and symbol graph: what the daemon
runs; its socket adds about a millisecond), and the p50 of one 20 KB question, also without
the ``messages`` and ``error-lines`` stages (each, and both; round-robin, BIG_ROUNDS warm runs
each, beside a plain question: what those stages cost).

``--embedder`` sets GITRAG_EMBEDDER for the run (default: what the settings say), so the
same table can be made for every embedder the product ships.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import Workspace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Variants whose 20 KB question is timed too (what the quoted-message stages cost), and rounds.
BIG_VARIANTS = ("hybrid", "-messages", "-error-lines")
BIG_ROUNDS = 10
PLAIN_QUESTION = "how does an option read its default value from an environment variable"

SETS = [  # (label, question file, corpus folder name)
    ("fastapi", "bench/eval/semble/fastapi.json", "fastapi"),
    ("flask", "bench/eval/semble/flask.json", "flask"),
    ("requests", "bench/eval/semble/requests.json", "requests"),
    ("click", "bench/eval/click-8.1.7.jsonl", "click"),
    ("click-long", "bench/eval/click-long.jsonl", "click"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="folder holding the click, fastapi, flask and requests corpora")
    ap.add_argument("--embedder", default=None, help="GITRAG_EMBEDDER for this run (default: the settings')")
    ap.add_argument("--only", action="append", default=[], help="run only these sets (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file (bench/results/README.md)")
    args = ap.parse_args()
    if args.embedder:
        os.environ["GITRAG_EMBEDDER"] = args.embedder

    from gitrag.index.indexer import Indexer
    from gitrag.index.store import SearchFilter
    from gitrag.index.workspace import open_workspace
    from gitrag.query.evaluation import load_dataset, run_dataset
    from gitrag.query.ranking import STAGES
    from gitrag.query.retrieval import search
    from gitrag.surfaces import output

    variants = ["hybrid", *(f"-{s}" for s in STAGES), "rrf"]
    table: dict[str, dict[str, float]] = {v: {} for v in variants}
    latencies: dict[str, list[float]] = {v: [] for v in variants}
    embedder = ""
    big_p50 = None
    big_by: dict[str, float] = {}
    short_by: dict[str, float] = {}
    for label, qfile, corpus in SETS:
        if args.only and label not in args.only:
            continue
        path = ROOT / qfile
        if not path.exists():
            continue
        data = load_dataset(path)
        ws = open_workspace(str(Path(args.corpus) / corpus))
        try:
            with output.progress_bar(False) as progress:
                Indexer(ws, progress).sync()
            embedder = ws.embedder.fingerprint
            flt = SearchFilter(path_prefix=data.scope) if data.scope else None

            def searcher(variant: str, ws: Workspace = ws, flt: SearchFilter | None = flt) -> Callable[[str], list]:
                if variant == "rrf":
                    return partial(search, ws, k=10, scope=flt, snippets=False, rerank_results=False)
                off = () if variant == "hybrid" else (variant[1:],)
                return partial(search, ws, k=10, scope=flt, snippets=False, disable=off)

            searchers = {v: searcher(v) for v in variants}
            for v in searchers.values():  # warm the model and the symbol graph outside the timings
                v(data.questions[0].query)
            report = run_dataset(data, searchers, 10)
            if label == "click-long":
                big = _twenty_kb([q.query for q in data.questions])
                timed = {v: searchers[v] for v in BIG_VARIANTS if v in searchers}
                timed["-messages -error-lines"] = partial(search, ws, k=10, scope=flt, snippets=False,
                                                          disable=("messages", "error-lines"))
                short = PLAIN_QUESTION
                times = {v: [] for v in timed}
                short_times = {v: [] for v in timed}
                for _ in range(BIG_ROUNDS + 1):  # round-robin: the variants share whatever load there is
                    for v, run in timed.items():
                        started = time.perf_counter()
                        run(big)
                        times[v].append((time.perf_counter() - started) * 1000.0)
                        started = time.perf_counter()
                        run(short)
                        short_times[v].append((time.perf_counter() - started) * 1000.0)
                big_by = {v: _p50(t[1:]) for v, t in times.items()}
                short_by = {v: _p50(t[1:]) for v, t in short_times.items()}
                big_p50 = big_by["hybrid"]
        finally:
            ws.close()
        for v, mode in report.modes.items():
            row = table[v]
            if data.format == "semble":
                row[label] = mode.overall["ndcg@10"]
            elif label == "click":
                row["click"] = mode.overall["mrr@10"]
                for kind, scores in mode.by_kind.items():
                    row[f"click {kind}"] = scores["mrr@10"]
                row["click id R@5"] = mode.by_kind.get("identifier", {}).get("recall@5", 0.0)
            else:
                row[f"{label} R@5"] = mode.overall["recall@5"]
                row[f"{label} MRR"] = mode.overall["mrr@10"]
            if label != "click-long":
                latencies[v] += [run.latency_ms for run in mode.runs]
            else:
                row["long p50 ms"] = _p50([run.latency_ms for run in mode.runs])
    for v, row in table.items():
        semble = [row[s] for s in ("fastapi", "flask", "requests") if s in row]
        if len(semble) == 3:
            row["semble mean"] = sum(semble) / 3
        row["p50 ms"] = _p50(latencies[v])
    if args.record:
        import record  # bench/record.py, beside this script
        record.write(args.record, title=f"Shared sets, every stage ({embedder})", issue=11, subject="retrieval",
                     tables=[record.by_row("nDCG@10 for the semble sets, MRR@10 for click; -STAGE = hybrid without it",
                                           table, "variant", digits=3)])
    if args.json:
        print(json.dumps({"embedder": embedder, "variants": table, "p50_ms_20kb": big_p50,
                          "p50_ms_20kb_by_variant": big_by, "p50_ms_plain_by_variant": short_by}, indent=1))
        return 0
    cols = [c for c in ("fastapi", "flask", "requests", "semble mean", "click", "click concept", "click identifier",
                        "click mixed", "click id R@5", "click-long R@5", "click-long MRR", "p50 ms", "long p50 ms")
            if any(c in row for row in table.values())]
    print(f"embedder {embedder}; nDCG@10 for semble sets, MRR@10 for click; -STAGE = hybrid without that stage")
    print("| variant | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for v, row in table.items():
        cells = [(f"{row[c]:.1f}" if c.endswith("ms") else f"{row[c]:.3f}") if c in row else "-" for c in cols]
        print(f"| {v} | " + " | ".join(cells) + " |")
    if big_p50 is not None:
        print(f"hybrid, one 20 KB question (the long set's texts joined), p50 of {BIG_ROUNDS} warm runs: {big_p50:.1f} ms")
        for v, ms in big_by.items():
            print(f"  {v}: 20 KB p50 {ms:.1f} ms, plain question p50 {short_by[v]:.1f} ms")
    return 0


def _twenty_kb(texts: list[str]) -> str:
    """The texts joined and repeated to 20,000 characters: a pasted log of that size."""
    out = ""
    while len(out) < 20_000:
        out += "\n\n".join(texts) + "\n\n"
    return out[:20_000]


def _p50(values: list[float]) -> float:
    from gitrag.query.evaluation.runner import percentile

    return percentile(values, 50)


if __name__ == "__main__":
    raise SystemExit(main())
