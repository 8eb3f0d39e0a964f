"""gitrag against semble at scale, the same trees, interleaved in one run (issue 21).

    python bench/bench_scale.py --tree /path/click --tree /path/sqlalchemy --tree /path/sympy \\
        [--synthetic 500000] [--work /tmp/bench-scale] [--semble-venv /tmp/bench-scale/semble-venv] \\
        [--queries 20] [--out results.jsonl] [--skip-semble]

Each ``--tree`` is a git repository with its work tree checked out (semble reads the
work tree, gitrag the committed tree: the same files). ``--synthetic N`` adds a repository
of at least N gitrag chunks made of copies of the given trees under different paths
(``copy<i>/<tree>/...``, built with ``git read-tree --prefix``, the objects shared through
git alternates), sized from the chunk counts measured on the trees in this run.

semble (0.7.0, from PyPI) is installed by this script into its own venv
(``--semble-venv``, made with ``python -m venv`` and pip) and pointed at gitrag's own
bundled static model (``gitrag/models/minilm-static``: ``model_path``), so the two engines
embed with the same model; it indexes code, docs and config (gitrag indexes docs too).

Per tree, alternating gitrag and semble for each figure:

- first index: CPU s (user + sys, worker processes included), wall s, peak RSS MB of the
  largest process, chunks, CPU ms per chunk, disk (gitrag: its whole GITRAG_HOME, state,
  store and the vector cache; semble: its saved index folder) and bytes per chunk;
- one-shot question without a daemon: a new process each time (gitrag ``ask --no-answer
  --json``; semble: load the saved index, search), median wall s and CPU s of 3;
- warm query p50 ms: gitrag through its daemon's socket (the daemon answering), semble
  in one process on its loaded index; ``--queries`` questions;
- gitrag only: client CPU ms per ``gitrag ask`` with the daemon up (median of 5), the
  daemon's RSS idle after the questions (VmRSS MB).

Results are printed as a table and appended, one JSON object per tree, to ``--out``
(written as each tree finishes, so a long run's partial figures are kept). The machine
load (1-minute average) is recorded before each tree: timings under load are noisy, the
ratios of one run are the figures to read.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "gitrag" / "models" / "minilm-static"
SEMBLE = "semble==0.7.0"
QUESTIONS = [
    "how are command line options parsed", "where is the connection pool created", "simplify an expression",
    "how are errors reported to the user", "where is the configuration file read", "how is a matrix inverted",
    "parse the arguments of a function", "how does caching work", "where are tests for the parser",
    "how is text wrapped to the terminal width", "compile a SQL statement", "how are symbols compared",
    "what happens when a file is missing", "how is the session closed", "series expansion of a function",
    "where is the version number defined", "how are types converted", "register a new dialect",
    "how is output colored", "solve a system of equations", "how are warnings emitted",
    "lazy loading of relationships", "integrate a rational function", "print a help message",
]
GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@e.invalid", "GIT_COMMITTER_NAME": "Bench",
           "GIT_COMMITTER_EMAIL": "b@e.invalid", "GIT_CONFIG_NOSYSTEM": "1"}

# -- running and measuring ------------------------------------------------------------------


def measured(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
             timeout: float = 7200) -> dict[str, Any]:
    """Run ``cmd``; {"cpu", "wall", "rss_mb", "stdout", "rc"}: CPU of the process and the
    children it waited for (wait4), wall seconds, peak RSS of the largest of them."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    return {"wall": wall, "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")[-2000:],
            "rc": proc.returncode}


def run_timed(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 7200) -> dict[str, Any]:
    """:func:`measured` plus CPU and peak RSS from ``/usr/bin/time``-free accounting: the
    command runs under a small Python wrapper that waits for it with ``os.wait4``."""
    wrapper = ("import json, os, subprocess, sys, time\n"
               "t0 = time.perf_counter()\n"
               "p = subprocess.Popen(sys.argv[1:])\n"
               "_, status, ru = os.wait4(p.pid, 0)\n"
               "wall = time.perf_counter() - t0\n"
               "sys.stderr.write('\\nBENCH ' + json.dumps({'cpu': ru.ru_utime + ru.ru_stime, 'rss_mb': ru.ru_maxrss / 1024,"
               " 'wall': wall, 'status': os.waitstatus_to_exitcode(status)}) + '\\n')\n")
    got = measured([sys.executable, "-c", wrapper, *cmd], env=env, cwd=cwd, timeout=timeout)
    line = [x for x in got["stderr"].splitlines() if x.startswith("BENCH ")]
    stats = json.loads(line[-1][6:]) if line else {"cpu": float("nan"), "rss_mb": float("nan"),
                                                   "wall": got["wall"], "status": got["rc"]}
    return {**got, **stats}


def du(path: Path) -> int:
    """Bytes allocated on disk to the files under ``path`` (``du``: Qdrant Edge preallocates
    sparse files, whose apparent size is far more than they take)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def load() -> float:
    return os.getloadavg()[0]


# -- gitrag ------------------------------------------------------------------------------------


def gitrag_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITRAG_")}
    env.update(GITRAG_HOME=str(home), GITRAG_PROGRESS_INTERVAL="off", XDG_CONFIG_HOME=str(home / "config"))
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def gitrag_index(tree: Path, home: Path) -> dict[str, Any]:
    got = run_timed([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(tree)], env=gitrag_env(home))
    if got["status"] != 0:
        raise SystemExit(f"gitrag index {tree} failed: {got['stderr']}")
    summary = json.loads(got["stdout"])
    chunks = summary["chunks_total"]
    disk = du(home)
    return {"cpu": got["cpu"], "wall": got["wall"], "rss_mb": got["rss_mb"], "chunks": chunks,
            "cpu_ms_per_chunk": 1000 * got["cpu"] / max(chunks, 1), "disk_mb": disk / 1e6,
            "bytes_per_chunk": disk / max(chunks, 1), "files": summary["files_indexed"]}


def gitrag_one_shot(tree: Path, home: Path, questions: list[str]) -> dict[str, Any]:
    runs = [run_timed([sys.executable, "-m", "gitrag", "ask", q, "--no-answer", "--json", "--repo", str(tree)],
                      env=gitrag_env(home)) for q in questions]
    return {"wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs)}


def gitrag_warm(tree: Path, home: Path, questions: list[str]) -> dict[str, Any]:
    env = gitrag_env(home)
    daemon = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        probe = [sys.executable, "-c", _WARM_PROBE, str(tree), json.dumps(questions)]
        deadline = time.monotonic() + 120
        while True:
            got = subprocess.run(probe, env=env, capture_output=True, text=True)
            if got.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if got.returncode != 0:
            raise SystemExit(f"gitrag warm queries on {tree} failed: {got.stderr[-2000:]}")
        latencies = json.loads(got.stdout)
        clients = [run_timed([sys.executable, "-m", "gitrag", "ask", q, "--no-answer", "--repo", str(tree)], env=env)
                   for q in questions[:5]]
        rss = _rss_mb(daemon.pid)
    finally:
        stop_daemon(daemon)
    return {"p50_ms": statistics.median(latencies), "client_cpu_ms": 1000 * statistics.median(c["cpu"] for c in clients),
            "daemon_rss_idle_mb": rss}


def stop_daemon(daemon: subprocess.Popen) -> None:
    """SIGTERM the bench's daemon, wait up to 60 s, then SIGKILL it."""
    daemon.terminate()
    try:
        daemon.wait(60)
    except subprocess.TimeoutExpired:
        daemon.kill()


_WARM_PROBE = """
import json, sys, time
from gitrag.daemon import client
tree, questions = sys.argv[1], json.loads(sys.argv[2])
client.request("ask", timeout=600, repo=tree, question=questions[0], k=10, mode="hybrid", path="", lang="",
               no_answer=True, expand=0)  # warms the model, the store and the graph's pages
out = []
for q in questions:
    t0 = time.perf_counter()
    client.request("ask", timeout=600, repo=tree, question=q, k=10, mode="hybrid", path="", lang="", no_answer=True,
                   expand=0)
    out.append(1000 * (time.perf_counter() - t0))
print(json.dumps(out))
"""


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- semble ------------------------------------------------------------------------------------


def semble_python(venv: Path) -> Path:
    """The venv's python, with semble installed from PyPI (made on first use)."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if subprocess.run([str(py), "-c", "import semble"], capture_output=True).returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", SEMBLE], check=True)
    return py


_SEMBLE = """
import json, sys, time
from pathlib import Path
from semble import SembleIndex
from semble.types import ContentType
op, tree, saved, model = sys.argv[1:5]
if op == "index":
    index = SembleIndex.from_path(tree, content=(ContentType.CODE, ContentType.DOCS, ContentType.CONFIG),
                                  model_path=model)
    index.save(saved)
    print(json.dumps({"chunks": index.stats.total_chunks, "files": index.stats.indexed_files}))
elif op == "search":
    index = SembleIndex.load_from_disk(saved)
    index.search(sys.argv[5], top_k=10)
    print("{}")
else:
    index = SembleIndex.load_from_disk(saved)
    questions = json.loads(sys.argv[5])
    index.search(questions[0], top_k=10)
    out = []
    for q in questions:
        t0 = time.perf_counter()
        index.search(q, top_k=10)
        out.append(1000 * (time.perf_counter() - t0))
    print(json.dumps(out))
"""


def semble_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "true"}


def semble_index(py: Path, tree: Path, saved: Path) -> dict[str, Any]:
    got = run_timed([str(py), "-c", _SEMBLE, "index", str(tree), str(saved), str(MODEL)], env=semble_env())
    if got["status"] != 0:
        raise SystemExit(f"semble index {tree} failed: {got['stderr']}")
    stats = json.loads(got["stdout"].strip().splitlines()[-1])
    disk = du(saved)
    return {"cpu": got["cpu"], "wall": got["wall"], "rss_mb": got["rss_mb"], "chunks": stats["chunks"],
            "cpu_ms_per_chunk": 1000 * got["cpu"] / max(stats["chunks"], 1), "disk_mb": disk / 1e6,
            "bytes_per_chunk": disk / max(stats["chunks"], 1), "files": stats["files"]}


def semble_one_shot(py: Path, tree: Path, saved: Path, questions: list[str]) -> dict[str, Any]:
    runs = [run_timed([str(py), "-c", _SEMBLE, "search", str(tree), str(saved), str(MODEL), q], env=semble_env())
            for q in questions]
    return {"wall": statistics.median(r["wall"] for r in runs), "cpu": statistics.median(r["cpu"] for r in runs)}


def semble_warm(py: Path, tree: Path, saved: Path, questions: list[str]) -> dict[str, Any]:
    got = subprocess.run([str(py), "-c", _SEMBLE, "warm", str(tree), str(saved), str(MODEL), json.dumps(questions)],
                         env=semble_env(), capture_output=True, text=True, check=True)
    return {"p50_ms": statistics.median(json.loads(got.stdout.strip().splitlines()[-1]))}


# -- the synthetic repository ------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def synthetic(work: Path, trees: list[Path], chunks: dict[str, int], target: int) -> Path:
    """A repository of at least ``target`` gitrag chunks: copies of ``trees`` (largest
    first, round robin) under ``copy<i>/<name>/``, from their HEAD trees (git alternates)."""
    repo = work / f"synthetic-{target}"
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    alternates = [str(Path(git(t, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "objects")
                  for t in trees]
    (repo / ".git" / "objects" / "info" / "alternates").write_text("\n".join(alternates) + "\n")
    order = sorted(trees, key=lambda t: -chunks[t.name])
    total, i = 0, 0
    while total < target:
        t = order[i % len(order)]
        git(repo, "read-tree", f"--prefix=copy{i}/{t.name}/", git(t, "rev-parse", "HEAD^{tree}"))
        total += chunks[t.name]
        i += 1
    tree = git(repo, "write-tree")
    commit = git(repo, "commit-tree", tree, "-m", f"{i} copies, ~{total} chunks")
    git(repo, "update-ref", "refs/heads/main", commit)
    git(repo, "checkout", "-q", "-f", "main")
    return repo


# -- the run -----------------------------------------------------------------------------------


def bench_tree(tree: Path, work: Path, py: Path | None, questions: list[str], one_shot: list[str]) -> dict[str, Any]:
    name = tree.name
    home = work / f"home-{name}"
    saved = work / f"semble-{name}"
    for p in (home, saved):
        if p.exists():
            shutil.rmtree(p)
    row: dict[str, Any] = {"tree": name, "load_before": load()}
    row["gitrag_index"] = gitrag_index(tree, home)
    if py is not None:
        row["semble_index"] = semble_index(py, tree, saved)
    row["gitrag_one_shot"] = gitrag_one_shot(tree, home, one_shot)
    if py is not None:
        row["semble_one_shot"] = semble_one_shot(py, tree, saved, one_shot)
    row["gitrag_warm"] = gitrag_warm(tree, home, questions)
    if py is not None:
        row["semble_warm"] = semble_warm(py, tree, saved, questions)
    row["load_after"] = load()
    return row


def print_row(row: dict[str, Any]) -> None:
    g, s = row["gitrag_index"], row.get("semble_index")
    print(f"\n== {row['tree']} (load {row['load_before']:.1f} -> {row['load_after']:.1f})")
    print(f"{'':28}{'gitrag':>12}{'semble':>12}{'ratio':>8}")

    def line(label: str, a: float, b: float | None, fmt: str = "{:.1f}") -> None:
        ratio = f"{a / b:.2f}" if b else "-"
        print(f"{label:28}{fmt.format(a):>12}{(fmt.format(b) if b is not None else '-'):>12}{ratio:>8}")

    line("first index CPU s", g["cpu"], s and s["cpu"])
    line("first index wall s", g["wall"], s and s["wall"])
    print(f"{'  gitrag wall / own CPU':28}{g['wall'] / g['cpu']:>12.2f}")
    line("chunks", g["chunks"], s and s["chunks"], "{:.0f}")
    line("CPU ms per chunk", g["cpu_ms_per_chunk"], s and s["cpu_ms_per_chunk"], "{:.2f}")
    line("peak RSS MB (index)", g["rss_mb"], s and s["rss_mb"], "{:.0f}")
    line("disk MB", g["disk_mb"], s and s["disk_mb"])
    line("disk bytes per chunk", g["bytes_per_chunk"], s and s["bytes_per_chunk"], "{:.0f}")
    line("one-shot ask wall s", row["gitrag_one_shot"]["wall"], row.get("semble_one_shot", {}).get("wall"), "{:.2f}")
    line("one-shot ask CPU s", row["gitrag_one_shot"]["cpu"], row.get("semble_one_shot", {}).get("cpu"), "{:.2f}")
    line("warm p50 ms", row["gitrag_warm"]["p50_ms"], row.get("semble_warm", {}).get("p50_ms"))
    print(f"{'client CPU ms per ask':28}{row['gitrag_warm']['client_cpu_ms']:>12.0f}")
    print(f"{'daemon RSS idle MB':28}{row['gitrag_warm']['daemon_rss_idle_mb']:>12.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", type=Path, default=[], help="a git repository (repeatable)")
    ap.add_argument("--synthetic", type=int, default=0, help="also a repository of at least this many chunks")
    ap.add_argument("--synthetic-only", action="store_true", help="index only the synthetic repository "
                    "(chunk counts of the trees from --counts)")
    ap.add_argument("--counts", default="", help="tree=chunks,... for --synthetic-only")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench-scale")
    ap.add_argument("--semble-venv", type=Path, default=None)
    ap.add_argument("--skip-semble", action="store_true")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file (bench/results/README.md)")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    py = None if args.skip_semble else semble_python(args.semble_venv or args.work / "semble-venv")
    questions = QUESTIONS[: args.queries]
    one_shot = QUESTIONS[-3:]
    chunks: dict[str, int] = {}
    if args.counts:
        chunks = {k: int(v) for k, v in (p.split("=") for p in args.counts.split(","))}
    trees = [t.resolve() for t in args.tree]
    todo = [] if args.synthetic_only else list(trees)
    rows = []
    for tree in todo:
        row = bench_tree(tree, args.work, py, questions, one_shot)
        chunks[tree.name] = row["gitrag_index"]["chunks"]
        rows.append(row)
        print_row(row)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    if args.synthetic:
        repo = synthetic(args.work, trees, chunks, args.synthetic)
        row = bench_tree(repo, args.work, py, questions, one_shot)
        rows.append(row)
        print_row(row)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    if args.record and rows:
        import record  # bench/record.py, beside this script
        record.write(args.record, title="Scale: gitrag against semble", issue=21, subject="indexing",
                     tables=[record.side_by_side("per tree", {r["tree"]: r for r in rows})])


if __name__ == "__main__":
    main()
