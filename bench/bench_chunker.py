"""Chunker throughput beside tree-sitter's raw parse, and the chunk size distribution.

Runs over the running interpreter's standard library ``.py`` files (site-packages
excluded), or with ``--repo DIR`` over the ``.py`` files committed in a git repository
(e.g. one built by ``bench/eval/make_corpus.sh attrs==24.2.0 DIR``). Times are CPU seconds
of this process (``time.process_time``), so other work on the machine disturbs them less
than wall time.

    python bench/bench_chunker.py [--sample N] [--max-tokens 256] [--counter hash|estimate|local]
                                  [--repo DIR] [--show-short PATH]

``--sample N`` keeps every N-th file (sorted by path). ``--counter hash`` counts tokens
with the test embedder's counter (``HashEmbedder.count_tokens``); ``estimate`` uses the
chunker's default ``ceil(len/3)``; ``local`` the bundled all-MiniLM-L6-v2 tokenizer (its
256-token window is then the cap unless ``--max-tokens`` says otherwise).
``--show-short PATH`` lists the chunks of that file that span at most 2 lines.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

from gitrag.index.chunking import analyze
from gitrag.index.chunking.treesitter import get_parser
from gitrag.index.embedders.hashing import HashEmbedder


def repo_sources(repo: str, sample: int) -> list[tuple[str, bytes]]:
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z", "--", "*.py"], capture_output=True, check=True)
    files = sorted(p for p in out.stdout.decode().split("\0") if p)
    return [(p, (Path(repo) / p).read_bytes()) for p in files[::sample] if (Path(repo) / p).is_file()]


def stdlib_sources(sample: int) -> list[tuple[str, bytes]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    return [(str(p.relative_to(root)), p.read_bytes()) for p in files[::sample]]


def percentiles(values: list[int]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "-"
    p50 = ordered[len(ordered) // 2]
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"p50 {p50:>5}  p90 {p90:>5}  max {ordered[-1]:>5}  mean {statistics.fmean(ordered):7.1f}"


def timed(fn: Callable[[], None]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--counter", choices=["hash", "estimate", "local"], default="hash")
    parser.add_argument("--repo", default="", help="chunk this git repository's .py files instead of the stdlib")
    parser.add_argument("--show-short", default="", metavar="PATH")
    args = parser.parse_args()
    sources = repo_sources(args.repo, args.sample) if args.repo else stdlib_sources(args.sample)
    megabytes = sum(len(d) for _, d in sources) / 1e6
    counter = HashEmbedder().count_tokens if args.counter == "hash" else None
    if args.counter == "local":
        from gitrag.config import Settings
        from gitrag.index.embedders import create

        counter = create(Settings(embedder="local")).count_tokens
    parser_ = get_parser("python")
    parse_s = timed(lambda: [parser_.parse(d) for _, d in sources])
    results = []
    chunk_s = timed(lambda: results.extend(
        analyze(p, d, max_tokens=args.max_tokens, count_tokens=counter) for p, d in sources))
    chunks = [c for r in results for c in r.chunks]
    count = counter or (lambda text: -(-len(text) // 3))
    nonws = [len("".join(c.text.split())) for c in chunks]
    tokens = [count(c.text) for c in chunks]
    kinds: dict[str, int] = {}
    for c in chunks:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    where = f"{args.repo} .py" if args.repo else "stdlib .py"
    print(f"files: {len(sources)} {where}, {megabytes:.1f} MB; max_tokens {args.max_tokens}, "
          f"counter {args.counter}")
    print(f"tree-sitter parse only : {parse_s:6.2f} s CPU  {megabytes / parse_s:6.2f} MB/s")
    print(f"chunker (analyze)      : {chunk_s:6.2f} s CPU  {megabytes / chunk_s:6.2f} MB/s"
          f"  ({chunk_s / parse_s:.1f}x parse; includes parse, graph, embedding texts)")
    print(f"chunks: {len(chunks)}  ({len(chunks) / len(sources):.1f} per file)  "
          + "  ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(f"non-ws chars of text   : {percentiles(nonws)}")
    print(f"tokens of text         : {percentiles(tokens)}")
    short = [c for c in chunks if c.end_line - c.start_line <= 1]
    print(f"short chunks           : {len(short)} span <= 2 lines "
          f"({100 * len(short) / max(1, len(chunks)):.1f}%), "
          f"{sum(n < 100 for n in nonws)} hold < 100 non-ws chars of text")
    for (path, data), r in zip(sources, results):
        if path == args.show_short:
            print(f"{path}: {len(r.chunks)} chunks, {sum(c.end_line - c.start_line <= 1 for c in r.chunks)} short")
            for c in r.chunks:
                if c.end_line - c.start_line <= 1:
                    print(f"  {c.start_line}-{c.end_line} {c.symbol}: {data[c.start_byte:c.end_byte][:60]!r}")
    print(f"fallbacks to windows   : {sum(bool(r.fallback_reason) for r in results)} files; "
          f"files with parse errors: {sum(bool(r.error_bytes) for r in results)}")


if __name__ == "__main__":
    main()
