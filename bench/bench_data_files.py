"""Chunks a one-line (minified) data file costs, with and without the minified-data skip.

Synthetic JSON/SVG made here (no data set): one record list dumped on one line, the same
records pretty-printed, and a one-line SVG. For each: its size, its average line, the chunks
the chunker makes of it (default ``max_tokens=256``, the default chars/3 token count), and
what the file policy says (``gitrag.index.policy.machine_written``). Deterministic: counts,
not timings.

    python bench/bench_data_files.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json

from gitrag.index.chunking import analyze
from gitrag.index.policy import machine_written


def _records(n: int) -> list[dict[str, object]]:
    return [{"id": i, "name": f"station {i}", "lat": round(48.0 + i / 1000, 4), "lon": round(2.0 + i / 1000, 4),
             "tags": ["bus", "tram"] if i % 2 else ["metro"]} for i in range(n)]


def files() -> list[tuple[str, bytes]]:
    return [
        ("data/stations.min.json (0.98 MB, one line)", json.dumps(_records(11_000)).encode()),
        ("data/stations.json (same records, indent 2)", json.dumps(_records(11_500)[:2_000], indent=2).encode()),
        ("data/small.json (one line)", json.dumps({"name": "demo", "port": 8080}).encode()),
        ("icons/logo.svg (one line)", ("<svg>" + "<path d='M0 0L1 1'/>" * 2000 + "</svg>").encode()),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the rows here as JSON")
    args = ap.parse_args()
    rows = []
    for label, data in files():
        path = label.split(" ", 1)[0]
        lines = data.count(b"\n") + 1
        chunks = len(analyze(path, data).chunks)
        reason = machine_written(path, data)
        rows.append([label, len(data), len(data) // lines, chunks, reason or "indexed", 0 if reason else chunks])
        print(f"{label:48} {len(data):>9} B  {chunks:>6} chunks  -> {reason or 'indexed'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
