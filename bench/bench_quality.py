"""Retrieval quality per embedder, side by side in one run.

    python bench/bench_quality.py --corpora /path/to/corpora [--embedder static --embedder local --embedder hash]
        [--static-model DIR ...] [--modes hybrid,dense] [--home-root /tmp/quality]

For each embedder (and each extra ``--static-model`` folder, run as ``static``) runs
``gitrag eval --json`` on the click dev set (``bench/eval/click-8.1.7.jsonl``, MRR@10)
and the three semble sets (``bench/eval/semble/{fastapi,flask,requests}.json``, nDCG@10),
each against ``CORPORA/<name>`` built by ``bench/eval/make_corpus.sh``, with its own
``GITRAG_HOME`` under ``--home-root`` (kept, so a second run reuses the index; pass
``--home local=DIR`` to reuse a warm one). Prints one row per embedder and mode:
click MRR@10, the three nDCG@10 and their mean, and the wall time of the whole row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = [
    ("click", ROOT / "bench/eval/click-8.1.7.jsonl", "mrr@10"),
    ("fastapi", ROOT / "bench/eval/semble/fastapi.json", "ndcg@10"),
    ("flask", ROOT / "bench/eval/semble/flask.json", "ndcg@10"),
    ("requests", ROOT / "bench/eval/semble/requests.json", "ndcg@10"),
]


def run_eval(env: dict[str, str], questions: Path, corpus: Path, modes: list[str]) -> dict[str, dict[str, float]]:
    """``{mode: overall scores}`` of one ``gitrag eval --json`` run."""
    cmd = [sys.executable, "-m", "gitrag", "eval", str(questions), "--repo", str(corpus), "--json"]
    for mode in modes:
        cmd += ["--mode", mode]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    data = json.loads(proc.stdout)
    return {mode: report["overall"] for mode, report in data["modes"].items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--embedder", action="append", default=[])
    parser.add_argument("--static-model", action="append", default=[], type=Path)
    parser.add_argument("--modes", default="hybrid,dense")
    parser.add_argument("--home-root", type=Path, default=Path("/tmp/gitrag-quality"))
    parser.add_argument("--home", action="append", default=[], help="NAME=DIR: reuse this GITRAG_HOME for NAME")
    args = parser.parse_args()
    modes = args.modes.split(",")
    homes = dict(h.split("=", 1) for h in args.home)
    runs: list[tuple[str, dict[str, str]]] = [(name, {"GITRAG_EMBEDDER": name}) for name in args.embedder or ["static", "local", "hash"]]
    runs += [(f"static:{d.name}", {"GITRAG_EMBEDDER": "static", "GITRAG_STATIC_MODEL": str(d.resolve())}) for d in args.static_model]

    print(f"{'embedder':28} {'mode':7} {'click MRR':>9} {'fastapi':>8} {'flask':>8} {'requests':>8} {'semble mean':>11} {'wall s':>7}")
    for name, extra in runs:
        env = {**os.environ, **extra, "PYTHONPATH": str(ROOT)}
        env["GITRAG_HOME"] = homes.get(name, str(args.home_root / name.replace(":", "-")))
        start = time.perf_counter()
        scores = {set_name: run_eval(env, questions, args.corpora / set_name, modes) for set_name, questions, _ in SETS}
        wall = time.perf_counter() - start
        for mode in modes:
            row = [scores[set_name][mode][metric] for set_name, _, metric in SETS]
            semble = sum(row[1:]) / 3
            print(f"{name:28} {mode:7} {row[0]:9.3f} {row[1]:8.3f} {row[2]:8.3f} {row[3]:8.3f} {semble:11.3f} {wall:7.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
