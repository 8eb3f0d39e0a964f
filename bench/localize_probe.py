"""Where the gold files sit in each candidate list of a kept localization index.

    python bench/localize_probe.py --keep DIR [--repo R] [--lang L] [--depth N] [--results FILE]

For every issue of the localization sets indexed under ``--keep`` (bench_localize.py's kept
branches ``loc-<id>``), the rank of its first gold file among the files of each list, files
ordered by their best chunk (``-`` when absent from the list read ``--depth`` deep): the
question's dense and sparse lists as gitrag reads them (the long-question digest and term
weights), and the same for the issue's parts read on their own: the title, the prose
(the asker's words), the code (fenced blocks and tracebacks), and the files defining the
names the question writes (symbol graph). A diagnostic of candidate generation: which
list, read how deep, reaches the gold file. Reads only; moves no HEAD.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, required=True)
    ap.add_argument("--repo", action="append", default=[])
    ap.add_argument("--lang", action="append", default=[])
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--results", type=Path, help="a bench_localize results file: also print gitrag's rank")
    args = ap.parse_args()
    os.environ["GITRAG_HOME"] = str(args.keep / "home")
    os.environ["XDG_CONFIG_HOME"] = str(args.keep / "home" / "config")
    import bench_localize as bl

    from gitrag import logs
    from gitrag.index import sparse, symbols
    from gitrag.index.workspace import open_workspace
    from gitrag.query import ranking
    from gitrag.query.ranking import parts as qparts

    logs.configure("warning")
    rows = bl.load_sets(bl.SETS, args.lang, args.repo)
    done = {}
    if args.results:
        for line in args.results.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["id"]] = r["gitrag"]["first_rank"]
    by_repo = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    cols = ["gitrag", "dense", "sparse", "title-d", "title-s", "prose-d", "prose-s", "code-d", "code-s", "defs",
            "s-sum3"]
    print("| id | " + " | ".join(cols) + " |")
    tally = {c: [0, 0, 0] for c in cols}  # within 10, 50, depth
    for repo, issues in by_repo.items():
        dest = args.keep / "work" / repo.replace("/", "+")
        if not dest.exists():
            continue
        ws = open_workspace(str(dest))
        try:
            for issue in issues:
                br = ws.state.branch(f"loc-{issue['id']}")
                if br is None or br.indexed_commit != issue["base_commit"]:
                    continue
                gold = set(issue["files"])
                q = ranking.analyse(issue["question"])
                ranks: dict[str, int | None] = {"gitrag": done.get(issue["id"])}

                def run(dense_text: str | None, text: str | None, weights=None, ws=ws, br=br) -> tuple[list, list]:
                    d = s = []
                    if dense_text:
                        d = ws.store.search(br.collection, dense=ws.embedder.embed_query(dense_text), sparse=None,
                                            limit=args.depth, branch=br.view, with_payload=False)
                    if text:
                        vec = sparse.query_vector(text, weights)
                        if vec.indices:
                            s = ws.store.search(br.collection, dense=None, sparse=vec, limit=args.depth,
                                                branch=br.view, with_payload=False)
                    return d, s

                paths: dict[str, str] = {}

                def file_rank(hits, agg: bool = False, ws=ws, paths=paths, gold=gold) -> int | None:
                    need = [h.id for h in hits if h.id not in paths]
                    if need:
                        for i, p in ws.state.payloads(need).items():
                            paths[i] = p["path"]
                    if agg:
                        per: dict[str, list[float]] = defaultdict(list)
                        for h in hits:
                            if h.id in paths:
                                per[paths[h.id]].append(float(h.score))
                        order = sorted(per, key=lambda p: -sum(sorted(per[p], reverse=True)[:3]))
                    else:
                        order = list(dict.fromkeys(paths[h.id] for h in hits if h.id in paths))
                    return next((i + 1 for i, p in enumerate(order) if p in gold), None)

                d, s = run(q.dense_text, q.text, q.term_weights)
                ranks["dense"], ranks["sparse"], ranks["s-sum3"] = file_rank(d), file_rank(s), file_rank(s, True)
                pp = qparts.split(issue["question"])
                for name in ("title", "prose", "code"):
                    texts = pp.get(name) or []
                    best_d = best_s = None
                    for t in texts:
                        d, s = run(t[:1200], t, qparts.weights(t))
                        rd, rs = file_rank(d), file_rank(s)
                        best_d = rd if best_d is None or (rd is not None and rd < best_d) else best_d
                        best_s = rs if best_s is None or (rs is not None and rs < best_s) else best_s
                    ranks[f"{name}-d"], ranks[f"{name}-s"] = best_d, best_s
                defs: list[str] = []
                for name in [*q.identifiers, *q.capitalised][:40]:
                    found = symbols.find_definitions(ws, name, branch=br.name)
                    if 0 < len(found) <= 5:
                        defs.extend(x.path for x in found)
                defs = list(dict.fromkeys(defs))
                ranks["defs"] = next((i + 1 for i, p in enumerate(defs) if p in gold), None)
                for c in cols:
                    r = ranks.get(c)
                    if r is not None:
                        tally[c][2] += 1
                        tally[c][1] += r <= 50
                        tally[c][0] += r <= 10
                print(f"| {issue['id']} | " + " | ".join("-" if ranks.get(c) is None else str(ranks[c]) for c in cols)
                      + " |", flush=True)
        finally:
            ws.close()
    print("within 10 / 50 / depth: " + ", ".join(f"{c} {v[0]}/{v[1]}/{v[2]}" for c, v in tally.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
