"""Query latency on a large corpus: warm through the daemon, cold through the CLI.

    python bench/bench_query.py [--corpus DIR] [--files N] [--questions FILE] [--cold N] [--long N]

Indexes the corpus (default: the running Python's standard library, first N files, as
bench_index.py builds it) with the default (static) embedder, then
- warm: starts `gitrag daemon`, asks every question of the question set once through
  its socket (the first, which loads the model, is reported apart) and prints p50/p95;
- cold: stops the daemon and runs `gitrag ask` as a new process N times (model load
  included: what a user without the daemon waits), printing p50 and max.
Hybrid mode, k = 10. The questions are only a realistic load (default: the click set).
``--long N`` also asks N pasted-log-sized questions (20 KB each: the texts of
bench/eval/click-long.jsonl joined, starting at a different one each time) in the same warm
daemon and prints their p50/p95 apart.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_index import build_corpus  # noqa: E402 - found through the sys.path line above

QUESTIONS = HERE / "eval" / "click-8.1.7.jsonl"
LONG = HERE / "eval" / "click-long.jsonl"
LONG_CHARS = 20_000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def long_questions(n: int) -> list[str]:
    texts = [json.loads(line)["query"] for line in LONG.read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        rotated = texts[i % len(texts):] + texts[: i % len(texts)]
        text = ""
        while len(text) < LONG_CHARS:
            text += "\n\n".join(rotated) + "\n\n"
        out.append(text[:LONG_CHARS])
    return out


def warm(corpus: Path, questions: list[str]) -> tuple[float, list[float]]:
    from gitrag.daemon import client

    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not client.probe()["running"]:
            if time.time() > deadline:
                raise SystemExit("the daemon did not start")
            time.sleep(0.1)
        times = []
        for q in questions:
            t = time.perf_counter()
            client.request("ask", timeout=300, repo=str(corpus), question=q, k=10, mode="hybrid")
            times.append((time.perf_counter() - t) * 1000)
        return times[0], times[1:]
    finally:
        client.request("stop", timeout=30)
        proc.wait(timeout=60)


def cold(corpus: Path, questions: list[str], runs: int) -> list[float]:
    times = []
    for q in questions[:runs]:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gitrag", "ask", q, "--repo", str(corpus), "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - t) * 1000)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--cold", type=int, default=5)
    ap.add_argument("--long", type=int, default=0, help="also time this many 20 KB questions")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gitrag-bench-q-"))
    os.environ["GITRAG_HOME"] = str(work / "home")
    os.environ.setdefault("GITRAG_EMBEDDER", "static")
    corpus = args.corpus.resolve() if args.corpus else build_corpus(work / "corpus", args.files)
    questions = [json.loads(line)["query"] for line in args.questions.read_text().splitlines() if line.strip()]

    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(corpus), "--json"], check=True,
                   stdout=subprocess.DEVNULL)
    index_s = time.perf_counter() - t
    long = long_questions(args.long)
    first, all_ms = warm(corpus, questions + long)
    warm_ms, long_ms = all_ms[: len(questions) - 1], all_ms[len(questions) - 1 :]
    cold_ms = cold(corpus, questions, args.cold)
    files = subprocess.run(["git", "ls-files"], cwd=corpus, capture_output=True, text=True).stdout.count("\n")
    print(f"corpus: {files} files (indexed in {index_s:.0f} s), {len(questions)} questions, hybrid, k=10")
    print(f"warm, through the daemon: p50 {statistics.median(warm_ms):7.1f} ms  p95 {pct(warm_ms, 0.95):7.1f} ms"
          f"  (first question, loading the model: {first:.0f} ms)")
    if long_ms:
        print(f"warm, 20 KB questions:    p50 {statistics.median(long_ms):7.1f} ms  p95 {pct(long_ms, 0.95):7.1f} ms"
              f"  ({len(long_ms)} questions of {LONG_CHARS} characters)")
    print(f"cold CLI, no daemon:      p50 {statistics.median(cold_ms):7.1f} ms  max {max(cold_ms):7.1f} ms  ({len(cold_ms)} runs)")
    print(f"cold / warm p50 = {statistics.median(cold_ms) / statistics.median(warm_ms):.0f}x")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
