"""Index benchmark on a large real corpus: full index, one-function sync, no-change sync.

Prints, from one run: end-to-end chunks/s of a full index beside the embedder's own raw
chunks/s on the same chunk texts (their ratio is the pipeline's overhead), the CPU time of
the first answers (ten hybrid questions right after the full index), the seconds and
chunks embedded of a one-function commit and of a sync with nothing changed, the ratio of
the one-function sync to the full index, peak RSS, and the full index and raw rates in
CPU seconds (user + sys of all threads; steadier than wall time on a shared machine).

    python bench/bench_index.py [--corpus DIR] [--files N] [--embedder static|local|hash] [--stages]

``--stages`` also prints the full index's CPU seconds per step (chunking, embedding, sparse
terms, SQLite calls, store calls), timed around each call with ``time.process_time``.

Without --corpus it builds the running Python's standard library as a one-commit git
repository with bench/eval/make_stdlib_corpus.sh (offline). --files N keeps the first N
files (sorted by path) in a commit of its own, to bound the run time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAKE_STDLIB = HERE / "eval" / "make_stdlib_corpus.sh"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]


QUESTIONS = [
    "how to parse a url query string", "decimal rounding modes", "open a zip file and read its members",
    "tcp socket server request handler", "submit work to a thread pool", "json encoder for custom objects",
    "read csv rows as dicts", "format a date as iso 8601", "compress data with zlib", "walk a directory tree",
]


def build_corpus(dest: Path, files: int | None) -> Path:
    subprocess.run(["sh", str(MAKE_STDLIB), str(dest)], check=True, stdout=subprocess.DEVNULL)
    if files:
        tracked = subprocess.run(["git", "ls-files"], cwd=dest, check=True, capture_output=True, text=True).stdout.split()
        drop = sorted(tracked)[files:]
        for i in range(0, len(drop), 500):
            subprocess.run(["git", "rm", "-q", "--", *drop[i : i + 500]], cwd=dest, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", f"keep {files} files"], cwd=dest, check=True)
    return dest


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def edit_one_function(repo: Path) -> str:
    """Change one line inside the first function of the largest .py file; returns its path."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=repo, check=True, capture_output=True, text=True).stdout.split()
    with_def = [p for p in tracked if "\ndef " in (repo / p).read_text(errors="replace")]
    target = max(with_def, key=lambda p: (repo / p).stat().st_size)
    lines = (repo / target).read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("def ") and i + 1 < len(lines):
            lines.insert(i + 1, "    _bench_marker = 1\n")
            break
    (repo / target).write_text("".join(lines))
    subprocess.run([*GIT, "commit", "-q", "-am", "bench: edit one function"], cwd=repo, check=True)
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--files", type=int, default=None)
    ap.add_argument("--embedder", default="static")
    ap.add_argument("--stages", action="store_true", help="print the full index's CPU seconds per step")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="gitrag-bench-"))
    os.environ["GITRAG_HOME"] = str(work / "home")
    os.environ["GITRAG_EMBEDDER"] = args.embedder
    corpus = args.corpus
    if corpus is None:
        corpus = build_corpus(work / "corpus", args.files)
    else:
        copy = work / "corpus"
        shutil.copytree(corpus, copy, symlinks=True)
        corpus = copy

    from gitrag import logs
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    logs.configure("warning")

    ws = open_workspace(corpus)
    t = time.perf_counter()
    ws.embedder.embed_documents(["warm up"])
    load_s = time.perf_counter() - t

    stages = _time_stages() if args.stages else None
    cpu = time.process_time()
    full = Indexer(ws).sync()
    full_cpu = time.process_time() - cpu
    if stages is not None:
        stages.pop("__restore__")()
        for name, spent in sorted(stages.items(), key=lambda kv: -kv[1]):
            print(f"  stage {name:24s} {spent:6.2f} CPU-s")
        print(f"  stage {'(the rest)':24s} {full_cpu - sum(stages.values()):6.2f} CPU-s")
    rows = ws.state.points(full.branch)
    texts = list(_texts(ws, rows))
    t, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(texts), 32):
        ws.embedder.embed_documents(texts[i : i + 32])
    raw_s, raw_cpu = time.perf_counter() - t, time.process_time() - cpu

    e2e = full.chunks_embedded / full.seconds if full.seconds else 0.0
    raw = len(texts) / raw_s if raw_s else 0.0
    files = subprocess.run(["git", "ls-files"], cwd=corpus, capture_output=True, text=True).stdout.count("\n")
    print(f"corpus: {files} files, {full.chunks_total} chunks, embedder {args.embedder} (model load {load_s:.1f} s), "
          f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}")
    print(f"full index:        {full.seconds:8.2f} s  {full.chunks_embedded:6d} embedded  {e2e:7.1f} chunks/s end to end")
    print(f"raw embedder:      {raw_s:8.2f} s  {len(texts):6d} texts     {raw:7.1f} chunks/s  (end-to-end / raw = {e2e / raw if raw else 0:.2f})",
          flush=True)
    # CPU seconds (user + sys, all threads): steadier than wall time on a shared machine
    e2e_cpu = full.chunks_embedded / full_cpu if full_cpu else 0.0
    raw_cpu_rate = len(texts) / raw_cpu if raw_cpu else 0.0
    print(f"full index CPU:    {full_cpu:8.2f} s  {e2e_cpu:7.1f} chunks/CPU-s;  raw embedder CPU {raw_cpu:6.2f} s  "
          f"{raw_cpu_rate:7.1f} chunks/CPU-s  (ratio {e2e_cpu / raw_cpu_rate if raw_cpu_rate else 0:.2f})", flush=True)

    # the first answers after the first index: hybrid search latency (CPU ms per question)
    from gitrag.query import retrieval

    cpu = time.process_time()
    for question in QUESTIONS:
        retrieval.ask(ws, question, k=10)
    ask_ms = (time.process_time() - cpu) / len(QUESTIONS) * 1000
    print(f"first answers:     {ask_ms:8.1f} CPU-ms per question (hybrid, k=10, {len(QUESTIONS)} questions)", flush=True)

    edited = edit_one_function(corpus)
    one = Indexer(ws).sync()
    none = Indexer(ws).sync()
    ws.close()
    print(f"one-function sync: {one.seconds:8.3f} s  {one.chunks_embedded:6d} embedded  ({edited})")
    print(f"no-change sync:    {none.seconds:8.3f} s  {none.chunks_embedded:6d} embedded")
    print(f"one-function sync / full index = {one.seconds / full.seconds:.5f}")
    print(f"peak RSS: {peak_rss_mb():.0f} MB")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _time_stages() -> dict:
    """Wrap the index's steps to add up their CPU seconds; ``["__restore__"]()`` unwraps."""
    from gitrag.index import indexer, sparse, state, views
    from gitrag.index.store import edge

    steps = [(indexer, "analyze", "chunking"), (indexer, "_embed", "embedding"),
             (sparse, "document_vector", "sparse terms"), (state.State, "plan", "sqlite plan (trial)"),
             (state.State, "commit_paths", "sqlite commit"), (state.State, "put_symbols", "sqlite symbols"),
             (state.VectorCache, "put_vectors", "sqlite put_vectors"), (state.VectorCache, "put_sparse", "sqlite put_sparse"),
             (state.VectorCache, "get_sparse", "sqlite get_sparse"), (views, "record", "store point building"),
             (edge.EdgeStore, "upsert", "store upsert"), (edge.EdgeStore, "flush", "store flush")]
    spent: dict = {}
    originals = []
    for owner, attr, name in steps:
        fn = getattr(owner, attr)
        originals.append((owner, attr, fn))
        spent[name] = 0.0

        def timed(*a, _fn=fn, _name=name, **k):
            t = time.process_time()
            try:
                return _fn(*a, **k)
            finally:
                spent[_name] += time.process_time() - t

        setattr(owner, attr, timed)

    def restore() -> None:
        for owner, attr, fn in originals:
            setattr(owner, attr, fn)

    spent["__restore__"] = restore
    return spent


def _texts(ws, rows):
    """The embedding texts of the indexed chunks, re-chunked from their blobs."""
    from gitrag.index.chunking import analyze

    seen: set[str] = set()
    for path, blob in sorted({(r.path, r.payload["blob"]) for r in rows}):
        for chunk in analyze(path, ws.repo.read_blob(blob), max_tokens=ws.embedder.max_tokens,
                             count_tokens=ws.embedder.count_tokens).chunks:
            if chunk.hash not in seen:
                seen.add(chunk.hash)
                yield chunk.text


if __name__ == "__main__":
    sys.exit(main())
