"""How long does `gitrag ask` take right after a commit of hundreds of files, while the daemon
is still indexing it? (the liveness of ask's wait, GITRAG_ASK_WAIT, default 3 s)

    python bench/bench_ask_during_sync.py --tree SQLA_TREE --code before=OLD_CHECKOUT --code after=.
        [--subdir lib] [--rounds 2] [--wait 3]

For each round and each code (a checkout with its own ``.venv``, interleaved): a fresh
repository holding the tree's README, a fresh GITRAG_HOME, ``gitrag install --no-systemd``
(real hooks, a real daemon), ``gitrag index``; then ``--subdir`` of ``--tree`` (sqlalchemy's
``lib/``: 255 modules, ~16,000 chunks) is committed at once, and from the moment the commit
returns one ``gitrag ask --json --no-answer`` is timed (wall, the whole client process).
Reported per code: the wall times, and what the answer's ``worktree`` object and
``catching_up`` said. The tree comes from ``bench/eval/make_corpus.sh sqlalchemy==2.0.40 DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ENV = {"GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@e.invalid", "GIT_COMMITTER_NAME": "B",
       "GIT_COMMITTER_EMAIL": "b@e.invalid"}


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def one_round(code: Path, tree: Path, subdir: str, wait: float, scratch: Path) -> dict[str, Any]:
    """One timed ask after a big commit: {"wall_s", "worktree", "catching_up", "up_to_date"}."""
    gitrag = str(code / ".venv" / "bin" / "gitrag")
    home, repo = Path(tempfile.mkdtemp(dir=scratch)), Path(tempfile.mkdtemp(dir=scratch))
    env = {**os.environ, **ENV, "GITRAG_HOME": str(home), "GITRAG_ASK_WAIT": str(wait)}
    try:
        for cmd in (["git", "init", "-q", "-b", "main", "."],):
            _run(cmd, repo, env)
        shutil.copy(tree / "README.rst", repo / "README.rst")
        _run(["git", "add", "-A"], repo, env)
        _run(["git", "commit", "-qm", "init"], repo, env)
        for cmd in ([gitrag, "install", "--no-systemd"], [gitrag, "index"]):
            done = _run(cmd, repo, env)
            if done.returncode != 0:
                raise SystemExit(f"bench_ask_during_sync: {' '.join(cmd[1:])} failed: {done.stderr.strip()[-300:]}")
        shutil.copytree(tree / subdir, repo / subdir)
        _run(["git", "add", "-A"], repo, env)
        _run(["git", "commit", "-qm", "big"], repo, env)  # the post-commit hook tells the daemon
        start = time.monotonic()
        asked = _run([gitrag, "ask", "how is a session flushed", "--json", "--no-answer"], repo, env)
        wall = time.monotonic() - start
        data = json.loads(asked.stdout) if asked.returncode == 0 else {}
        return {"wall_s": round(wall, 2), "worktree": data.get("worktree"), "catching_up": data.get("catching_up"),
                "up_to_date": data.get("up_to_date"), "rc": asked.returncode}
    finally:
        _run([gitrag, "daemon", "--stop"], repo, env)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(repo, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, required=True, help="a checkout of the corpus (make_corpus.sh)")
    ap.add_argument("--code", action="append", required=True, metavar="NAME=DIR",
                    help="a gitrag checkout with its .venv (repeat; measured interleaved)")
    ap.add_argument("--subdir", default="lib", help="the folder of --tree committed at once")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--wait", type=float, default=3.0, help="GITRAG_ASK_WAIT, seconds")
    args = ap.parse_args()
    codes = [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve()) for c in args.code]
    scratch = Path(tempfile.mkdtemp(prefix="bench-ask-sync-"))
    out: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in codes}
    try:
        for r in range(args.rounds):
            for name, code in codes:
                load = os.getloadavg()[0]
                got = one_round(code, args.tree.resolve(), args.subdir, args.wait, scratch)
                got["load"] = round(load, 1)
                out[name].append(got)
                print(json.dumps({"round": r, "code": name, **got}), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for name, rows in out.items():
        walls = [row["wall_s"] for row in rows]
        print(f"{name}: wall s {walls} (median {statistics.median(walls):.2f}), wait {args.wait:g} s")


if __name__ == "__main__":
    main()
