"""Raw embedder throughput on realistic code chunks, and peak RSS.

    python bench/bench_embedder.py [--embedder static [--embedder local ...]] [--chunks 640] [--chars 1200] [--batch 32]

Chunks are consecutive ``--chars``-character slices of the running Python's standard
library ``.py`` files (sorted by path, blank slices skipped), the size the chunker aims
at. Prints model load time, token counting speed, embedding chunks/s (after a warm-up
batch, so the load is not counted), and the process's peak RSS. ``raw_throughput`` is
importable by other bench scripts.
"""

from __future__ import annotations

import argparse
import os
import resource
import sysconfig
import time
from pathlib import Path

from gitrag import logs
from gitrag.config import Settings
from gitrag.index.embedders import Embedder, create


def stdlib_chunks(count: int, chars: int = 1200) -> list[str]:
    """``count`` slices of ``chars`` characters from the standard library's .py files."""
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if "test" in path.parts or "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        chunks += [s for i in range(0, len(text), chars) if (s := text[i : i + chars]).strip()]
        if len(chunks) >= count:
            return chunks[:count]
    return chunks


def raw_throughput(embedder: Embedder, texts: list[str]) -> float:
    """Chunks per second of ``embedder.embed_documents(texts)`` (wall clock).

    The first two texts are embedded once before timing, so a lazily loaded model's load
    time is not counted. Batching is the embedder's own (``settings.batch_size``)."""
    if not texts:
        return 0.0
    embedder.embed_documents(texts[:2])
    start = time.perf_counter()
    embedder.embed_documents(texts)
    elapsed = time.perf_counter() - start
    return len(texts) / elapsed if elapsed > 0 else float("inf")


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(name: str, texts: list[str], args: argparse.Namespace) -> None:
    embedder = create(Settings(embedder=name, batch_size=args.batch))
    print(f"embedder {embedder.name}  fingerprint {embedder.fingerprint}  dim {embedder.dim}  max_tokens {embedder.max_tokens}")
    print(f"{len(texts)} chunks of {args.chars} chars, batch {args.batch}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}")

    start = time.perf_counter()
    counter = getattr(embedder, "count_tokens_batch", None)
    tokens = counter(texts) if counter else [embedder.count_tokens(t) for t in texts]
    count_s = time.perf_counter() - start
    over = sum(n > embedder.max_tokens for n in tokens)
    print(f"count_tokens:  {len(texts) / count_s:10.0f} chunks/s  (mean {sum(tokens) / len(tokens):.0f} tokens, {over} over max_tokens)")

    start = time.perf_counter()
    embedder.embed_documents(texts[:1])
    print(f"load + first:  {time.perf_counter() - start:10.2f} s")
    rate = raw_throughput(embedder, texts)
    print(f"embed:         {rate:10.1f} chunks/s")
    print(f"peak RSS:      {peak_rss_mb():10.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", action="append", default=[], help="repeat to compare side by side (default: static)")
    parser.add_argument("--chunks", type=int, default=640)
    parser.add_argument("--chars", type=int, default=1200)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    logs.configure("error")  # truncation warnings would drown the numbers

    texts = stdlib_chunks(args.chunks, args.chars)
    for name in args.embedder or ["static"]:
        measure(name, texts, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
