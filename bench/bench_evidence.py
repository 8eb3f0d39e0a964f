"""How much text ``gitrag ask`` sends to the chat model, against reading whole files.

    python bench/bench_evidence.py [--repo /tmp/corpus/click] [--questions bench/eval/click-8.1.7.jsonl]
                                   [--embedder hash|local] [--mode hybrid] [-k 10] [--budget 3000] [--json]

Indexes ``--repo`` in a temporary GITRAG_HOME (so nothing else is touched), then for
every question: retrieves ``k`` results, selects the evidence exactly as the answer path
does (``gitrag.query.answer.select_evidence`` within ``--budget`` tokens) and measures

* evidence tokens: the numbered excerpts sent (headers + line-numbered snippets),
* prompt tokens: the whole chat request (system prompt + question + evidence),
* file tokens: the whole files those excerpts come from (what an agent reading the
  files instead would send), and the same for the files of all ``k`` results.

Tokens are gitrag's conservative estimate, ``ceil(characters / 3)`` (real tokenizers
give ~3.5–4 characters per token on code, so true counts are ~15–25 % lower for both
sides alike). Prints median, p90 and max over the questions, and how many questions the
weak-evidence rule would answer without calling the model, for the question set and for
a few questions the repository cannot answer (``OFF_TOPIC``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_QUESTIONS = HERE / "eval" / "click-8.1.7.jsonl"
OFF_TOPIC = [
    "how do I bake sourdough bread", "kubernetes pod autoscaling limits", "zebra quantum marmalade",
    "what is the capital of australia", "tune postgres vacuum thresholds",
]


def _quantiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median": statistics.median(ordered), "p90": p90, "max": ordered[-1], "min": ordered[0]}


def _file_tokens(ws: Any, paths: set[str], cache: dict[str, int]) -> int:
    from gitrag.query.answer import count_tokens

    files = ws.state.files(ws.repo.branch())
    total = 0
    for p in paths:
        if p not in cache:
            cache[p] = count_tokens(ws.repo.read_blob(files[p].blob).decode("utf-8", "replace"))
        total += cache[p]
    return total


def measure(repo: str, questions: list[dict[str, Any]], mode: str, k: int, budget: int) -> dict[str, Any]:
    """Index ``repo`` (in the current GITRAG_HOME) and measure every question; see module doc."""
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query.answer import build_messages, count_tokens, evidence_strength, select_evidence
    from gitrag.query.retrieval import search

    ws = open_workspace(repo)
    try:
        t0 = time.perf_counter()
        summary = Indexer(ws).sync()
        index_s = time.perf_counter() - t0
        rows, cache = [], {}
        for q in questions:
            results = search(ws, q["query"], k=k, mode=mode)
            ev = select_evidence(results, budget)
            prompt = sum(count_tokens(m["content"]) for m in build_messages(q["query"], ev))
            rows.append({
                "id": q.get("id"), "items": len(ev), "truncated": sum(e.truncated for e in ev),
                "evidence_tokens": sum(e.tokens for e in ev), "prompt_tokens": prompt,
                "evidence_file_tokens": _file_tokens(ws, {e.path for e in ev}, cache),
                "result_file_tokens": _file_tokens(ws, {r.path for r in results}, cache),
                "weak": evidence_strength(results, mode, q["query"]).weak,
            })
        off_topic = sum(evidence_strength(search(ws, q, k=k, mode=mode), mode, q).weak for q in OFF_TOPIC)
    finally:
        ws.close()
    keys = ("evidence_tokens", "prompt_tokens", "evidence_file_tokens", "result_file_tokens", "items")
    ratios = [r["evidence_file_tokens"] / r["evidence_tokens"] for r in rows if r["evidence_tokens"]]
    return {
        "repo": repo, "questions": len(rows), "mode": mode, "k": k, "budget": budget,
        "embedder": os.environ.get("GITRAG_EMBEDDER", "local"), "chunks": summary.chunks_total,
        "index_seconds": round(index_s, 1), **{key: _quantiles([r[key] for r in rows]) for key in keys},
        "files_over_evidence_median": round(statistics.median(ratios), 1) if ratios else None,
        "questions_with_truncation": sum(1 for r in rows if r["truncated"]),
        "weak_questions": sum(1 for r in rows if r["weak"]),
        "off_topic_weak": f"{off_topic}/{len(OFF_TOPIC)}", "per_question": rows,
    }


def _report(m: dict[str, Any]) -> str:
    lines = [f"{m['questions']} questions on {m['repo']} ({m['chunks']} chunks, embedder {m['embedder']}, "
             f"mode {m['mode']}, k={m['k']}, budget {m['budget']} tokens; tokens = ceil(chars/3))",
             f"{'':32}{'median':>9}{'p90':>9}{'max':>9}"]
    names = {"evidence_tokens": "evidence sent", "prompt_tokens": "whole chat prompt",
             "evidence_file_tokens": "whole files of the evidence", "result_file_tokens": "whole files of all k results",
             "items": "evidence items"}
    for key, label in names.items():
        q = m[key]
        lines.append(f"{label:<32}{q['median']:>9.0f}{q['p90']:>9.0f}{q['max']:>9.0f}")
    lines.append(f"whole files / evidence, median: {m['files_over_evidence_median']}x; "
                 f"questions with a truncated snippet: {m['questions_with_truncation']}; "
                 f"weak evidence (no model call): {m['weak_questions']}/{m['questions']}, "
                 f"off-topic questions: {m['off_topic_weak']}; index {m['index_seconds']} s")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default="/tmp/corpus/click")
    ap.add_argument("--questions", default=str(DEFAULT_QUESTIONS))
    ap.add_argument("--embedder", default="hash", help="hash (fast, default) or local (the real model, ~1 min)")
    ap.add_argument("--mode", default="hybrid", choices=["hybrid", "dense", "sparse"])
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--budget", type=int, default=None, help="evidence budget in tokens (default: gitrag's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from gitrag import logs
    from gitrag.query.answer import EVIDENCE_BUDGET

    logs.configure("error")
    questions = [json.loads(line) for line in Path(args.questions).read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="gitrag-bench-evidence-") as home:
        os.environ["GITRAG_HOME"] = home
        os.environ["GITRAG_EMBEDDER"] = args.embedder
        m = measure(args.repo, questions, args.mode, args.k, args.budget or EVIDENCE_BUDGET)
    print(json.dumps(m) if args.json else _report(m))


if __name__ == "__main__":
    main()
