"""What the provisional cut of an edited file (gitrag.query.splice) costs, beside the chunker.

    python bench/bench_splice.py [--file PATH ...] [--reps 50] [--record FILE]

For a generated 500-line Python file (bench/bench_overlay.py's ``synthetic``: functions with
docstrings) and each ``--file`` (e.g. cobra's command.go, ky's source/utils/delay.ts), cut by
the chunker with the static embedder's token counts as the index holds it, two edits:

- ``inside``: a comment line added inside the middle chunk (what an agent's edit of one
  function leaves): the splice cuts it (no chunker);
- ``appended``: a new function after the last one: its definitions changed, so the splice
  answers None and the chunker cuts the file.

Per edit, CPU time (process time, median of ``--reps`` calls, ms): the whole splice, the part
of it that reads the definitions of the changed region (parse + the symbol graph's walk,
old and new), and the chunker on the edited file. All in one process, side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cpu_ms(fn: Any, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1000)
    return statistics.median(times)


def _edits(path: str, data: bytes, language: str) -> dict[str, bytes]:
    from gitrag.index.chunking import analyze

    chunks = [c for c in analyze(path, data).chunks if c.embeddable]
    mid = chunks[len(chunks) // 2]
    cut = data.index(b"\n", mid.start_byte) + 1
    comment = b"#" if language == "python" else b"//"
    appended = {"python": b"\n\ndef zebra_stripe_rows(rows):\n    return rows[::2]\n",
                "go": b"\nfunc zebraStripeRows(rows []string) []string {\n\treturn rows\n}\n"}.get(
        language, b"\n\nexport function zebraStripeRows(rows: string[]): string[] {\n\treturn rows;\n}\n")
    return {"inside": data[:cut] + b"    " + comment + b" a note\n" + data[cut:],
            "appended": data.rstrip(b"\n") + b"\n" + appended}


def measure(name: str, path: str, data: bytes, reps: int) -> dict[str, dict[str, Any]]:
    from gitrag.config import Settings
    from gitrag.index.chunking import analyze, language_for
    from gitrag.index.embedders import static
    from gitrag.query import splice

    emb = static.factory(Settings())
    cut = analyze(path, data, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens)
    committed = [{"start_byte": c.start_byte, "end_byte": c.end_byte, "start_line": c.start_line,
                  "end_line": c.end_line, "symbol": c.symbol, "kind": c.kind, "language": c.language,
                  "chunk_hash": c.hash} for c in cut.chunks if c.embeddable]
    graph = [{"name": d.name, "kind": d.kind, "start_line": d.start_line, "end_line": d.end_line,
              "parent": d.parent} for d in cut.definitions]
    language = language_for(path, data) or "text"
    rows: dict[str, dict[str, Any]] = {}
    original = splice._definitions_now
    for edit, new in _edits(path, data, language).items():
        got = splice.splice(path, data, new, committed, graph)
        timed: dict[str, Any] = {}

        def check(*args: Any, _timed: dict[str, Any] = timed) -> Any:
            t = time.process_time()
            try:
                return original(*args)
            finally:
                _timed["check"] = _timed.get("check", 0.0) + (time.process_time() - t) * 1000

        splice._definitions_now = check
        try:
            whole = _cpu_ms(lambda new=new: splice.splice(path, data, new, committed, graph), reps)
        finally:
            splice._definitions_now = original
        chunker = _cpu_ms(lambda new=new: analyze(path, new, max_tokens=emb.max_tokens, count_tokens=emb.count_tokens),
                          max(3, reps // 10))
        rows[f"{name}, {edit}"] = {"bytes": len(new), "cut by": "splice" if got is not None else "chunker",
                                   "splice ms": round(whole, 3), "of it, definitions ms": round(timed["check"] / reps, 3),
                                   "chunker ms": round(chunker, 2)}
    return rows


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    from bench_overlay import synthetic

    rows = measure("synthetic 500-line Python", "src/m.py", synthetic(3).encode(), args.reps)
    for f in args.file:
        rows.update(measure(f.name, f.name, f.read_bytes(), args.reps))
    width = max(len(k) for k in rows)
    for name, r in rows.items():
        print(f"{name:<{width}}  {r['bytes']:>6} B  cut by {r['cut by']:<7}  splice {r['splice ms']:6.3f} ms "
              f"(definitions {r['of it, definitions ms']:6.3f})  chunker {r['chunker ms']:6.2f} ms CPU")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, action="append", default=[], help="a real source file to measure too")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file")
    args = ap.parse_args()
    rows = run(args)
    if args.record:
        import record  # bench/record.py, beside this script

        files = "".join(f" --file {f.name}" for f in args.file)
        record.write(args.record, title="The provisional cut of an edited file (gitrag.query.splice)", issue=24,
                     subject="history", commands=[f"python bench/bench_splice.py{files} --reps {args.reps} --record "
                                                  f"{args.record.name}   # files: cobra's command.go, ky's "
                                                  "source/utils/delay.ts"],
                     text="CPU per call (median), one process. `inside`: a line added inside the middle chunk "
                          "(spliced); `appended`: a function after the last one (its definitions changed: the "
                          "splice declines and the chunker cuts the file, so the new function is named as the "
                          "chunker names it). `definitions`: the part of the splice that parses the changed "
                          "region (with its enclosing definitions) old and new and walks it as the symbol graph "
                          "does. The chunker column is what an exact cut costs (static embedder's token counts).",
                     tables=[record.by_row("splice vs chunker, CPU ms", rows, "file, edit")])


if __name__ == "__main__":
    main()
