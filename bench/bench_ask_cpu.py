"""CPU time of one in-process search, a plain question and a 20 KB pasted text: the cost of
the query stages measured so that a loaded machine does not hide it.

    python bench/bench_ask_cpu.py --repo DIR [--runs N] [--ablate STAGE]

Indexes the repository at DIR (incrementally, with the settings' embedder and GITRAG_HOME),
then runs gitrag.query.retrieval.search (hybrid, k = 10, no snippets) on a plain question and on
the texts of bench/eval/click-long.jsonl joined to 20,000 characters, ``--runs`` times
each after one warm-up, and prints the median process CPU time (``time.process_time``:
every thread of this process, the embedded store's included; other processes' load does
not count). Run it from two trees (``PYTHONPATH=TREE``) alternately to compare them, or give
``--ablate STAGE`` to time the search with that ranking stage switched off too, the two
interleaved run by run in this one process (the ratio side by side, on the same load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="the git repository to index and ask")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per question (default: %(default)s)")
    ap.add_argument("--ablate", action="append", default=[], metavar="STAGE",
                    help="also time the search without this stage (STAGE,STAGE for several), interleaved")
    args = ap.parse_args()

    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query.retrieval import search
    from gitrag.surfaces import output

    texts = [json.loads(line)["query"] for line in (ROOT / "bench/eval/click-long.jsonl").read_text().splitlines()
             if line.strip()]
    big = ""
    while len(big) < 20_000:
        big += "\n\n".join(texts) + "\n\n"
    questions = {"plain": "how does click parse options", "20 KB": big[:20_000]}
    with open_workspace(args.repo) as ws:
        with output.progress_bar(False) as progress:
            Indexer(ws, progress).sync()
        variants = {"": (), **{f" -{a}": tuple(a.split(",")) for a in args.ablate}}
        for label, question in questions.items():
            times: dict[str, list[float]] = {v: [] for v in variants}
            for off in variants.values():
                search(ws, question, k=10, snippets=False, disable=off)
            for _ in range(args.runs):
                for name, off in variants.items():
                    started = time.process_time()
                    search(ws, question, k=10, snippets=False, disable=off)
                    times[name].append((time.process_time() - started) * 1000.0)
            for name, ts in times.items():
                print(f"{ROOT.name}: {label}{name}: median CPU {statistics.median(ts):.1f} ms over {args.runs} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
