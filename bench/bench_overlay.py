"""What the work-tree overlay adds to a warm ask, and what ``ask --rev`` costs, on click.

    python bench/bench_overlay.py --click DIR [--trials N] [--behind 50] [--only overlay|daemon|rev]

DIR is a git clone of pallets/click (any commit with 50+ commits of history). In a fresh
GITRAG_HOME (a tmp folder), with the default (static) embedder, in one warm process (the
workspace, store and model open, as in the daemon):

- overlay: 20 committed and indexed files of 500 lines each (generated Python: functions
  with docstrings) are edited in the work tree (one function changed in each: what an
  agent's edits leave). ``ask`` with the overlay is timed against the same ask with
  ``--committed``, interleaved, question by question: the first ask after each round of
  new edits (the changed chunks never seen: chunked and embedded now), and asks once they
  are cached (the process's cache of chunked files). Also with every dirty chunk new
  (20 untracked files never seen) for the worst case, and "cached, new process" (only the
  SQLite vector cache: what a CLI ask without a daemon finds), and the first ask with the
  edited files cut provisionally from their committed chunks (gitrag.query.splice), as the
  daemon's asks do.
- daemon: the same 20 files and edits through a real daemon (``python -m gitrag daemon``,
  asked over its socket as ``gitrag ask`` and MCP ask it), whose warm-up rounds
  (gitrag.daemon.warm, every 0.5 s) build the overlay of a work tree asked in the last
  10 minutes: the first ask after each round of edits, made ``--delays`` seconds after the
  edits (0: at once; 1-3: an agent's turn between its edit and its next search), against
  the same ask with ``--committed`` right after it; the CPU time of the daemon process over
  idle seconds with a warmed work tree (what the rounds cost when nothing changes).
- --rev: the view of ``HEAD~behind`` is built from the index of HEAD (the ordinary
  incremental sync), timed with its first ask; chunks embedded vs reused, and the same
  revision asked again.

Prints p50s (ms) and ratios; timings are noisy on a shared machine, so every pair is
measured side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

QUESTIONS = ["how are command line options parsed", "where is the help text formatted", "prompt for a password",
             "progress bar rendering", "shell completion of arguments", "how does a group invoke subcommands",
             "convert a parameter value to a type", "read environment variables for options"]
WORDS = ("retry", "backoff", "session", "cart", "quantity", "token", "cache", "queue", "worker", "parse", "render",
         "window", "buffer", "stream", "option", "context", "command", "group", "value", "signal")


def synthetic(seed: int, lines: int = 500) -> str:
    """A Python file of about ``lines`` lines: functions with docstrings and bodies."""
    rnd = random.Random(seed)
    out: list[str] = [f'"""Generated module {seed}."""\n', "import os\n", "\n"]
    n = 0
    while len(out) < lines:
        a, b, c = rnd.sample(WORDS, 3)
        out += [f"\n\ndef {a}_{b}_{seed}_{n}({c}, limit=10):\n",
                f'    """Handle the {a} of a {b} with its {c}, at most limit times."""\n',
                "    total = 0\n", "    for i in range(limit):\n",
                f"        total += len(str({c})) * i + {rnd.randint(1, 999)}\n",
                f"        if total > {rnd.randint(100, 9999)}:\n", "            break\n", "    return total\n"]
        n += 1
    return "".join("".join(out).splitlines(keepends=True)[:lines])


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def p50(values: list[float]) -> float:
    return statistics.median(values)


CPU: list[tuple[float, bool]] = []  # (CPU ms of the process, overlay on) of every timed ask


def timed(fn, overlay: bool = False) -> float:
    """Wall ms of ``fn()``; its CPU ms (this process, all threads) goes to CPU: on a loaded
    machine the CPU time is the steadier measure of what the overlay costs."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    CPU.append(((time.process_time() - c0) * 1000, overlay))
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--click", required=True, type=Path, help="a git clone of pallets/click")
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--behind", type=int, default=50)
    ap.add_argument("--only", choices=("overlay", "daemon", "rev"), help="run one of the parts")
    ap.add_argument("--delays", default="0,1,3", help="daemon part: seconds between the edits and the first ask")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the printed figures as a results file (bench/results/README.md)")
    args = ap.parse_args()
    if args.record:
        import record  # bench/record.py, beside this script
        with record.capture() as out:
            run(args)
        record.write(args.record, title="Work-tree overlay and ask --rev", issue=24, subject="history",
                     tables=[record.printed("as printed by the run (p50s)", out.getvalue())])
    else:
        run(args)


def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gitrag-bench-overlay-"))
    os.environ["GITRAG_HOME"] = str(tmp / "home")
    os.environ.pop("GITRAG_EMBEDDER", None)
    repo = tmp / "click"
    subprocess.run(["git", "clone", "-q", str(args.click), str(repo)], check=True)
    try:
        if args.only in (None, "overlay"):
            overlay_bench(repo, args.trials)
        if args.only in (None, "daemon"):
            daemon_bench(repo, tmp, args.trials, [float(d) for d in args.delays.split(",")])
        if args.only in (None, "rev"):
            rev_bench(args.click, tmp, args.behind)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def overlay_bench(repo: Path, trials: int) -> None:
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query import worktree
    from gitrag.query.retrieval import ask

    files = [f"src/click/_bench/gen_{i}.py" for i in range(20)]
    for i, f in enumerate(files):
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / f).write_text(synthetic(i))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "20 files of 500 lines")
    with open_workspace(repo) as ws:
        t0 = time.perf_counter()
        s = Indexer(ws).sync()
        print(f"indexed click + 20 generated files: {s.chunks_total} chunks in {time.perf_counter() - t0:.1f} s")
        for q in QUESTIONS[:2]:  # warm the model, the store, the symbol graph
            ask(ws, q, worktree_overlay=False)
        lines = sum(len((repo / f).read_text().splitlines()) for f in files)
        print(f"dirty files: {len(files)}, {lines} lines in all")

        def edit(round_: int, new_files: bool) -> None:
            for i, f in enumerate(files):
                if new_files:
                    (repo / f"src/click/_bench/new_{i}.py").write_text(synthetic(10_000 + 100 * round_ + i))
                else:
                    text = synthetic(i).replace("total = 0\n", f"total = {round_ * 1000 + i}  # edited\n", 1)
                    (repo / f).write_text(text)

        for label, new_files in (("20 edited files (one function changed in each)", False),
                                 ("20 new untracked files (every chunk never seen)", True)):
            first, base_first, cached, base_cached, embedded = [], [], [], [], []
            no_reuse_cpu: list[float] = []
            cpu_pairs: list[tuple[float, float]] = []
            for t in range(trials):
                edit(t + 1, new_files)
                q = QUESTIONS[t % len(QUESTIONS)]
                base_first.append(timed(partial(ask, ws, q, worktree_overlay=False)))
                holder = {}
                first.append(timed(lambda h=holder, q=q: h.setdefault("r", ask(ws, q, worktree_overlay=True)), True))
                embedded.append(holder["r"].worktree["embedded"])
                CPU.clear()
                for q2 in QUESTIONS:
                    base_cached.append(timed(lambda q2=q2: ask(ws, q2, worktree_overlay=False)))
                    cached.append(timed(lambda q2=q2: ask(ws, q2, worktree_overlay=True), True))
                    with_reuse = worktree._committed
                    worktree._committed = _no_reuse  # the overlay before unchanged chunks kept their points
                    try:
                        c0 = time.process_time()
                        ask(ws, q2, worktree_overlay=True)
                        no_reuse_cpu.append((time.process_time() - c0) * 1000)
                    finally:
                        worktree._committed = with_reuse
                cpu_pairs.extend(zip([c for c, o in CPU if o], [c for c, o in CPU if not o]))
            print(f"\n{label}")
            print(f"  first ask:  overlay {p50(first):7.1f} ms  committed {p50(base_first):7.1f} ms  "
                  f"adds {p50([a - b for a, b in zip(first, base_first)]):7.1f} ms p50 "
                  f"(chunks embedded per first ask: p50 {p50(embedded):.0f})")
            print(f"  cached:     overlay {p50(cached):7.1f} ms  committed {p50(base_cached):7.1f} ms  "
                  f"adds {p50([a - b for a, b in zip(cached, base_cached)]):7.1f} ms p50 ({len(cached)} asks); CPU time: "
                  f"overlay {p50([a for a, _ in cpu_pairs]):.1f} ms, committed {p50([b for _, b in cpu_pairs]):.1f} ms, "
                  f"adds {p50([a - b for a, b in cpu_pairs]):.1f} ms p50")
            base_cpu = [b for _, b in cpu_pairs]
            print(f"  cached, every chunk of a dirty file scored in memory and its committed points dropped "
                  f"(before the reuse of unchanged chunks' points): CPU {p50(no_reuse_cpu):.1f} ms, adds "
                  f"{p50([a - b for a, b in zip(no_reuse_cpu, base_cpu)]):.1f} ms p50 (interleaved with the above)")
            fresh_proc, base = [], []
            for q2 in QUESTIONS:
                worktree._cache.clear()  # a new process: only the SQLite vector cache is left
                base.append(timed(partial(ask, ws, q2, worktree_overlay=False)))
                fresh_proc.append(timed(partial(ask, ws, q2, worktree_overlay=True)))
            print(f"  cached, new process: adds {p50([a - b for a, b in zip(fresh_proc, base)]):7.1f} ms p50")
            if not new_files:  # the daemon's first ask: edited files cut provisionally (gitrag.query.splice)
                firsts, bases, cpu_first, cpu_base = [], [], [], []
                worktree.PROVISIONAL = True
                try:
                    for t in range(trials):
                        edit(100 + t, False)
                        q = QUESTIONS[t % len(QUESTIONS)]
                        CPU.clear()
                        bases.append(timed(lambda q=q: ask(ws, q, worktree_overlay=False)))
                        firsts.append(timed(lambda q=q: ask(ws, q, worktree_overlay=True), True))
                        cpu_first += [c for c, o in CPU if o]
                        cpu_base += [c for c, o in CPU if not o]
                finally:
                    worktree.PROVISIONAL = False
                print(f"  first ask, edited files cut provisionally (as the daemon does): overlay {p50(firsts):7.1f} ms  "
                      f"committed {p50(bases):7.1f} ms  adds {p50([a - b for a, b in zip(firsts, bases)]):7.1f} ms p50; "
                      f"CPU adds {p50([a - b for a, b in zip(cpu_first, cpu_base)]):.1f} ms p50 ({trials} rounds)")
            if new_files:
                for i in range(20):
                    (repo / f"src/click/_bench/new_{i}.py").unlink()
        git(repo, "checkout", "-q", "--", ".")
        worktree._cache.clear()


def daemon_bench(repo: Path, tmp: Path, trials: int, delays: list[float]) -> None:
    """The first ask after edits through a real daemon whose warm-up rounds prepare the overlay."""
    import sys

    from gitrag.daemon import client, routing
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    os.environ["GITRAG_HOME"] = str(tmp / "home-daemon")
    files = [f"src/click/_bench/gen_{i}.py" for i in range(20)]
    if not (repo / files[0]).exists():
        for i, f in enumerate(files):
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            (repo / f).write_text(synthetic(i))
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "20 files of 500 lines")
    with open_workspace(repo) as ws:
        Indexer(ws).sync()
    log = open(tmp / "daemon.log", "ab")  # noqa: SIM115 - the daemon writes to it until the bench stops it
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while not client.probe(timeout=0.5)["running"]:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the daemon did not start; see {tmp / 'daemon.log'}")
            time.sleep(0.1)

        def ask(q: str, overlay: bool):
            got = routing.ask(str(repo), q, 10, "hybrid", "", "", True, worktree=overlay)
            assert got is not None, "no daemon answered"
            return got.response

        for q in QUESTIONS:  # warm the daemon's model and store; notes the work tree for the warm-up
            ask(q, False)
            ask(q, True)
        print(f"\ndaemon: 20 dirty files of 500 lines, first ask after each round of edits ({trials} rounds a delay)")
        round_ = 100
        for delay in delays:
            adds, firsts, bases, embedded = [], [], [], []
            for t in range(trials):
                round_ += 1
                for i, f in enumerate(files):
                    text = synthetic(i).replace("total = 0\n", f"total = {round_ * 1000 + i}  # edited\n", 1)
                    (repo / f).write_text(text)
                time.sleep(delay)
                q = QUESTIONS[t % len(QUESTIONS)]
                t0 = time.perf_counter()
                r = ask(q, True)
                first = (time.perf_counter() - t0) * 1000
                t0 = time.perf_counter()
                ask(q, False)
                base = (time.perf_counter() - t0) * 1000
                firsts.append(first)
                bases.append(base)
                adds.append(first - base)
                embedded.append((r.worktree or {}).get("embedded", -1))
            print(f"  edits, then {delay:g} s, then ask: overlay {p50(firsts):7.1f} ms  committed {p50(bases):7.1f} ms  "
                  f"adds {p50(adds):7.1f} ms p50 (max {max(adds):.0f}); chunks embedded by the ask itself: "
                  f"{embedded} (0: the warm-up had done it)")

        def cpu_s() -> float:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        ask(QUESTIONS[0], True)
        time.sleep(2)
        c0, t0 = cpu_s(), time.perf_counter()
        time.sleep(20)
        share = (cpu_s() - c0) / (time.perf_counter() - t0)
        print(f"  idle with the warmed work tree (nothing changing): the daemon used {100 * share:.1f}% of a core")
    finally:
        proc.terminate()
        proc.wait(30)
        git(repo, "checkout", "-q", "--", ".")


def _no_reuse(ws, branch, hidden, files):
    """gitrag.query.worktree._committed as it was: every committed point of a hidden path dropped."""
    ids = ws.state.point_ids(branch.name, sorted(hidden)) if hidden else set()
    return frozenset(ids), {}, {}


def rev_bench(click: Path, tmp: Path, behind: int) -> None:
    """On a clone of click as it is (not the overlay part's one), indexed at HEAD first."""
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace
    from gitrag.query import revisions

    os.environ["GITRAG_HOME"] = str(tmp / "home-rev")
    repo = tmp / "click-rev"
    subprocess.run(["git", "clone", "-q", str(click), str(repo)], check=True)
    with open_workspace(repo) as ws:
        s = Indexer(ws).sync()
        print(f"\nindexed click at HEAD: {s.chunks_total} chunks in {s.seconds:.1f} s")
        target = f"HEAD~{behind}"
        changed = len(git(repo, "diff", "--name-only", target, "HEAD").split())
        t0, c0 = time.perf_counter(), time.process_time()
        _, _, built = revisions.ensure(ws, target)  # what the first ask --rev does before answering
        response = revisions.ask(ws, target, QUESTIONS[0])
        first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        again = revisions.ask(ws, target, QUESTIONS[1])
        second = time.perf_counter() - t1
    print(f"\n--rev {target}: {changed} files differ from HEAD; view started from {built.started_from}")
    print(f"  first ask (view built + answer): {first:.2f} s wall, {first_cpu:.2f} s CPU (this process, all threads); sync {built.seconds:.2f} s: {built.files_indexed} files "
          f"chunked, {built.chunks_embedded} chunks embedded, {built.chunks_reused} from the cache, "
          f"{built.points_upserted} points written, {built.payloads_updated} memberships updated")
    print(f"  asked again: {second:.2f} s ({len(again.results)} results; {len(response.results)} the first time)")


if __name__ == "__main__":
    main()
