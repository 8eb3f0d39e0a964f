"""What a reader of a team server saves: its first answer against indexing the clone itself.

    python bench/bench_team.py --repo PATH [--url path:/tmp/team-srv] [--embedder static]

Two fresh clones of the repository at PATH (its committed HEAD), each with its own
GITRAG_HOME, in this process. The writer indexes its clone and publishes it
(``gitrag index --publish``'s code); the reader answers ``--questions`` questions from the
server. Printed side by side: the reader's first answer (copying the published manifest,
then the query) and its next answers, against the writer's first local index and its local
answers; chunks embedded by each (the reader: 0, only its questions), and whether the
reader's ranked results equal the writer's. ``--url`` defaults to qdrant-client's local
mode in a temporary folder (a stand-in: its filtered queries are slow, see BENCHMARKS.md,
"Team server"); give a real server's address to measure that one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

QUESTIONS = ["where is the configuration loaded", "how are errors reported to the user",
             "parse command line arguments", "open a file and read it", "what runs when the program starts"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="a git repository (its HEAD is cloned twice)")
    ap.add_argument("--url", default="", help="team server (default: qdrant-client local mode in a temp folder)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--embedder", default="static")
    ap.add_argument("--questions", type=int, default=len(QUESTIONS))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clones = []
        for name in ("writer", "reader"):
            subprocess.run(["git", "clone", "-q", args.repo, str(tmp / name)], check=True)
            subprocess.run(["git", "-C", str(tmp / name), "remote", "set-url", "origin",
                            "https://example.invalid/bench/repo.git"], check=True)
            clones.append(tmp / name)
        os.environ.update({"GITRAG_EMBEDDER": args.embedder, "GITRAG_TEAM_URL": args.url or f"path:{tmp / 'srv'}",
                           "GITRAG_TEAM_API_KEY": args.api_key})
        run(clones, tmp, QUESTIONS[: args.questions])


def run(clones: list[Path], tmp: Path, questions: list[str]) -> None:
    from gitrag import config
    from gitrag.index import publish, team
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query import retrieval
    from gitrag.query import team as team_query

    def home(name: str, role: str) -> config.Settings:
        os.environ["GITRAG_HOME"] = str(tmp / f"home-{name}")
        os.environ["GITRAG_TEAM_ROLE"] = role
        return config.load_settings()

    settings = home("writer", "writer")
    ws = open_workspace(clones[0])
    t0 = time.perf_counter()
    summary = Indexer(ws).sync()
    index_s = time.perf_counter() - t0
    local_times, local_results = [], []
    for q in questions:
        t = time.perf_counter()
        local_results.append([(r.path, r.start_line, r.end_line) for r in retrieval.ask(ws, q, k=10).results])
        local_times.append(time.perf_counter() - t)
    server = team.open_server(settings)
    t0 = time.perf_counter()
    done = publish.publish(ws, server, settings)
    publish_s = time.perf_counter() - t0
    server.close()
    ws.close()

    settings = home("reader", "reader")
    reader_times, same, pulled = [], 0, 0
    embedded = {"documents": 0}
    ws = open_workspace(clones[1])
    emb = ws.embedder
    real, real_query = emb.embed_documents, emb.embed_query
    asking = {"on": False}

    def counting(texts: list[str]):
        if not asking["on"]:  # a static embedder embeds a question as a document: not counted
            embedded["documents"] += len(texts)
        return real(texts)

    def query(text: str):
        asking["on"] = True
        try:
            return real_query(text)
        finally:
            asking["on"] = False

    emb.embed_documents = counting
    emb.embed_query = query
    for q, want in zip(questions, local_results, strict=True):
        t = time.perf_counter()
        got = team_query.ask(ws, settings, q, print, k=10)
        reader_times.append(time.perf_counter() - t)
        assert got is not None, "the reader did not answer from the server"
        pulled += got.team["pulled_paths"]
        mine = [(r.path, r.start_line, r.end_line) for r in got.results]
        same += mine == want
        if mine != want:
            print(f"differs: {q!r}\n  writer: {want}\n  reader: {mine}")
    ws.close()
    print(f"# {clones[0]}: {summary.files_indexed} files, {summary.chunks_total} chunks; server "
          f"{os.environ['GITRAG_TEAM_URL']}; {len(questions)} questions")
    print("| step | writer (local index) | reader (team server) |")
    print("|---|---|---|")
    print(f"| first index / first answer (copy + query) | {index_s:.2f} s | {reader_times[0]:.2f} s |")
    print(f"| publish | {publish_s:.2f} s ({done.points} points) | - |")
    later = statistics.median(reader_times[1:]) if len(reader_times) > 1 else float("nan")
    print(f"| next answers, median | {statistics.median(local_times) * 1000:.0f} ms | {later * 1000:.0f} ms |")
    print(f"| chunks embedded (besides the questions) | {summary.chunks_embedded} | {embedded['documents']} |")
    print(f"| manifest paths copied | - | {pulled} |")
    print(f"| questions with the writer's top 10 | - | {same}/{len(questions)} |")


if __name__ == "__main__":
    main()
