"""A warm daemon on an indexed repository: its memory after questions and idle, the latency of
a question through its socket, its CPU per question, and the client's CPU per ``gitrag ask``.

    python bench/bench_daemon.py --repo NAME=TREE=HOME [--repo ...] [--code LABEL=DIR ...]
        [--queries 20] [--idle 15] [--rounds 1] [--out results.jsonl] [--record FILE]

``--repo``: a work tree already indexed into the GITRAG_HOME ``HOME`` (``gitrag index`` with
that home; bench/bench_scale.py builds such trees). ``--code``: the gitrag checkout a daemon and
its clients run (``PYTHONPATH``; e.g. ``git archive main | tar -x -C /tmp/base``), repeatable:
each round runs every code on every repository, interleaved (default: this checkout). Every
process runs in the code's folder: ``-m`` and ``-c`` put the working directory ahead of
``PYTHONPATH``: run from a checkout, every code's processes imported that checkout's gitrag
(until 2026-12-04, when each process was given its code's folder). Every
code is byte-compiled first (``compileall``), as an installed package is: with
``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` each client would compile its modules
from source (~70 ms of CPU at load 25).

For each (repository, code), one daemon (its own process, not niced):

- warm: one question (the model, the store and the graph's pages), then ``--queries``
  questions through ``gitrag.daemon.client.request`` from one process; p50 and p90 ms, a
  ``ping`` round trip's p50 (connect, peer check, JSON both ways: the transport alone), and
  the daemon's CPU ms per question (``/proc/PID/stat`` before and after, its background
  work included: the overlay warm-up rounds) and a SHA-256 (16 hex) of every answer's JSON
  (keys sorted), the same for two codes that answer alike;
- memory right after the questions and again after ``--idle`` seconds without a request:
  Rss, Pss, Anonymous and the resident pages of the store's memory-mapped files (below
  HOME; file-backed, shared with the page cache and reclaimable) from ``/proc/PID/smaps``,
  and the peak (VmHWM); Rss counts the store's mapped pages, Anonymous does not;
- the first question after the idle spell (ms), and the client's CPU per ``gitrag ask
  QUESTION --no-answer`` (user + sys, median of 5, ``os.wait4``).

The 1-minute load average is recorded with each figure: on a shared machine wall times
measure the queue for a core, CPU times and side-by-side ratios are the figures to read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_scale import QUESTIONS, stop_daemon  # noqa: E402 - beside this script

_PROBE = """
import hashlib, json, os, statistics, sys, time
from gitrag.daemon import client
tree, questions = sys.argv[1], json.loads(sys.argv[2])
args = dict(repo=tree, k=10, mode="hybrid", path="", lang="", no_answer=True, expand=0)
t0 = time.perf_counter()
answers = [client.request("ask", timeout=600, question=questions[0], **args)]
first = 1000 * (time.perf_counter() - t0)
pid = client.request("ping", timeout=60)["pid"]
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
if len(questions) == 1:
    print(json.dumps({"first_ms": first}))
    raise SystemExit
c0, ask, ping = cpu(), [], []
for q in questions[1:]:
    t0 = time.perf_counter()
    client.request("ping", timeout=60)
    ping.append(1000 * (time.perf_counter() - t0))
    t0 = time.perf_counter()
    answers.append(client.request("ask", timeout=600, question=q, **args))
    ask.append(1000 * (time.perf_counter() - t0))
digest = hashlib.sha256(json.dumps(answers, sort_keys=True).encode()).hexdigest()[:16]
print(json.dumps({"first_ms": first, "p50_ms": statistics.median(ask), "p90_ms": statistics.quantiles(ask, n=10)[-1],
                  "ping_p50_ms": statistics.median(ping), "daemon_cpu_ms": 1000 * (cpu() - c0) / len(ask),
                  "digest": digest, "load": os.getloadavg()[0]}))
"""


def load() -> float:
    return round(os.getloadavg()[0], 1)


def memory(pid: int, home: Path) -> dict[str, float]:
    """MiB: Rss, Pss, Anonymous (smaps_rollup); the resident pages of the store's mapped files
    (mappings of files below ``home``), of git's pack files (``/.git/``) and of every other
    file (libraries, the model); the peak (VmHWM)."""
    out = {"rss": 0.0, "pss": 0.0, "anon": 0.0, "store_files": 0.0, "git_files": 0.0, "other_files": 0.0}
    keys = {"Rss:": "rss", "Pss:": "pss", "Anonymous:": "anon"}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in keys:
            out[keys[parts[0]]] = int(parts[1]) / 1024
    where: str | None = None
    prefix = str(home.resolve())
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            name = parts[5] if len(parts) >= 6 else ""
            where = (None if not name.startswith("/") else "store_files" if name.startswith(prefix)
                     else "git_files" if "/.git/" in name else "other_files")
        elif where is not None and parts[0] == "Rss:":
            out[where] += int(parts[1]) / 1024
        elif where is not None and parts[0] == "Anonymous:":  # a file mapping's copied-on-write pages
            out[where] -= int(parts[1]) / 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            out["peak"] = int(line.split()[1]) / 1024
    return {k: round(v, 1) for k, v in out.items()}


def env_for(home: Path, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITRAG_")}
    env.update(GITRAG_HOME=str(home), GITRAG_PROGRESS_INTERVAL="off", XDG_CONFIG_HOME=str(home / "config"),
               PYTHONPATH=str(code))
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def client_cpu(env: dict[str, str], tree: Path, questions: list[str]) -> float:
    """Median user+sys ms of ``gitrag ask Q --no-answer`` with the daemon up."""
    got = []
    for q in questions:
        proc = subprocess.Popen([sys.executable, "-m", "gitrag", "ask", q, "--no-answer", "--repo", str(tree)], env=env, cwd=env["PYTHONPATH"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"gitrag ask failed in {tree} (exit {os.waitstatus_to_exitcode(status)})")
        got.append(1000 * (ru.ru_utime + ru.ru_stime))
    return statistics.median(got)


def probe(env: dict[str, str], tree: Path, questions: list[str]) -> dict[str, Any]:
    got = subprocess.run([sys.executable, "-c", _PROBE, str(tree), json.dumps(questions)], env=env, cwd=env["PYTHONPATH"],
                         capture_output=True, text=True)
    if got.returncode != 0:
        raise SystemExit(f"the probe failed on {tree}: {got.stderr[-2000:]}")
    return dict(json.loads(got.stdout))


def one(name: str, tree: Path, home: Path, code: Path, args: argparse.Namespace) -> dict[str, Any]:
    env = env_for(home, code)
    log = (Path(args.work) / f"daemon-{name}.log").open("ab")
    daemon = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon"], env=env, cwd=code, stdin=subprocess.DEVNULL,
                              stdout=log, stderr=log)
    row: dict[str, Any] = {"repo": name, "code": str(code), "load_before": load()}
    try:
        deadline = time.monotonic() + 120
        up = "import sys\nfrom gitrag.daemon import client\nsys.exit(0 if client.probe()['running'] else 1)"
        while subprocess.run([sys.executable, "-c", up], env=env, cwd=code, capture_output=True).returncode != 0:
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the daemon did not start for {tree}")
            time.sleep(0.5)
        row["started"] = memory(daemon.pid, home)
        row["warm"] = probe(env, tree, QUESTIONS[: args.queries + 1])
        row["after_questions"] = memory(daemon.pid, home) | {"load": load()}
        row["client_cpu_ms"] = client_cpu(env, tree, QUESTIONS[-5:])
        row["client_load"] = load()
        time.sleep(args.idle)
        row["idle"] = memory(daemon.pid, home) | {"load": load(), "after_s": args.idle}
        row["first_after_idle_ms"] = probe(env, tree, QUESTIONS[-6:-5])["first_ms"]
    finally:
        stop_daemon(daemon)
        log.close()
    return row


def show(row: dict[str, Any]) -> None:
    w, a, i = row["warm"], row["after_questions"], row["idle"]
    print(f"== {row['repo']} {row['code']} (load {row['load_before']} -> {i['load']})")
    print(f"  warm p50 {w['p50_ms']:.1f} ms, p90 {w['p90_ms']:.1f}, ping p50 {w['ping_p50_ms']:.1f}, "
          f"daemon CPU {w['daemon_cpu_ms']:.1f} ms per question (load {w['load']:.1f}), answers {w['digest']}")
    for label, m in (("after the questions", a), (f"idle {i['after_s']:g} s", i)):
        print(f"  {label:20} Rss {m['rss']:.0f} MiB = anon {m['anon']:.0f} + store files {m['store_files']:.0f} + git "
              f"{m['git_files']:.0f} + other files {m['other_files']:.0f}; Pss {m['pss']:.0f}, peak {m['peak']:.0f} "
              f"(load {m['load']})")
    print(f"  first question after the idle spell {row['first_after_idle_ms']:.0f} ms; client CPU per ask "
          f"{row['client_cpu_ms']:.0f} ms (load {row['client_load']})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", default=[], required=True, help="NAME=TREE=HOME (repeatable)")
    ap.add_argument("--code", action="append", default=[], help="LABEL=DIR: a gitrag checkout (repeatable)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--idle", type=float, default=15.0, help="seconds without a request before the idle figure")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", default="/tmp", help="folder for the daemons' logs")
    ap.add_argument("--out", type=Path, default=None, help="append one JSON object per run")
    ap.add_argument("--record", type=Path, metavar="FILE", help="also write the figures as a results file")
    args = ap.parse_args()
    repos = [(n, Path(t).resolve(), Path(h).resolve()) for n, t, h in (r.split("=", 2) for r in args.repo)]
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.code] or [("this", ROOT)]
    for _, code in codes:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "gitrag")], check=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                       stdout=subprocess.DEVNULL)
    rows = []
    for _ in range(args.rounds):
        for name, tree, home in repos:
            for label, code in codes:
                row = one(name, tree, home, code, args) | {"label": label}
                rows.append(row)
                show(row)
                if args.out:
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
    if args.record:
        import record

        record.write(args.record, title="Daemon at rest and warm", issue=21, subject="queries",
                     tables=[record.side_by_side("", {f"{r['repo']} {r['label']}": {
                         k: v for k, v in r.items() if k not in ("repo", "code", "label")} for r in rows})])


if __name__ == "__main__":
    main()
