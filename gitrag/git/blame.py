"""Blame of line ranges with git's own ``git blame`` (the command line), several ranges of
one file in one run.

``git blame --porcelain -L a,b -L c,d COMMIT -- PATH`` walks the file's history once for
all the ranges asked of it, and git's blame is several times faster than libgit2's on a
real history (BENCHMARKS.md, "ask --blame": click, p50 ~0.23 s against ~1.1 s a range
in one run). Each range's answer is the newest (by committer time; a descendant on a tie)
of the commits that last changed one of its lines, as :func:`gitrag.git.log.blame_range`
answers. When git is not on PATH or the run fails, that libgit2 blame answers instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from gitrag.git import log as gitlog
from gitrag.git.log import BlameLine
from gitrag.git.repo import GitRepo

TIMEOUT_S = 60.0  # one file's run; a path beyond it is answered by libgit2 (or None)
PARALLEL = 4  # files blamed at once


def _run(git: str, cwd: str, commit: str, path: str, ranges: Sequence[tuple[int, int]]) -> dict[int, str] | None:
    """{final line: commit id} for every line of ``ranges`` git attributes, or None when the run failed."""
    args = [git, "-c", "core.quotepath=off", "blame", "--porcelain"]
    for start, end in ranges:
        args += ["-L", f"{start},{end}"]
    args += [commit, "--", path]
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    lines: dict[int, str] = {}
    for raw in done.stdout.split(b"\n"):  # group headers: "<sha> <orig line> <final line> [<count>]"
        if not raw or raw.startswith(b"\t"):
            continue
        parts = raw.split(b" ")
        if len(parts) >= 3 and len(parts[0]) in (40, 64) and parts[1].isdigit() and parts[2].isdigit():
            lines[int(parts[2])] = parts[0].decode("ascii", "replace")
    return lines or None


def _newest(repo: GitRepo, shas: set[str]) -> BlameLine | None:
    best, best_time = None, 0
    for cid in sorted(shas):
        try:
            c = gitlog.lookup_commit(repo, cid)
        except (KeyError, ValueError):
            continue
        newer = best is None or c.commit_time > best_time or (
            c.commit_time == best_time and cid != best.commit and gitlog.descends(repo, cid, best.commit))
        if newer:
            a = c.author
            best, best_time = BlameLine(cid, int(a.time), int(a.offset), a.name, a.email), c.commit_time
    return best


def blame_ranges(repo: GitRepo, commit: str, wanted: Sequence[tuple[str, int, int]]
                 ) -> dict[tuple[str, int, int], BlameLine | None]:
    """For each ``(path, start, end)`` of ``wanted`` (lines 1-based, inclusive, as of
    ``commit``), the newest of the commits that last changed one of its lines; None where
    git cannot say (the path is not in that tree, a range past its end). One ``git blame``
    per path (its ranges together), up to PARALLEL paths at once."""
    by_path: dict[str, list[tuple[int, int]]] = {}
    for path, start, end in wanted:
        if start >= 1 and end >= start:
            by_path.setdefault(path, [])
            if (start, end) not in by_path[path]:
                by_path[path].append((start, end))
    git = shutil.which("git")
    cwd = str(repo.workdir or repo.git_dir)
    out: dict[tuple[str, int, int], BlameLine | None] = {key: None for key in wanted}

    def one(path: str) -> dict[int, str] | None:
        return _run(git, cwd, commit, path, by_path[path]) if git else None

    paths = sorted(by_path)
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(paths)))) as pool:
        results = dict(zip(paths, pool.map(one, paths)))
    for path, ranges in by_path.items():
        lines = results.get(path)
        for start, end in ranges:
            if lines is None:  # git missing or failed here: libgit2's blame of the range
                out[(path, start, end)] = gitlog.blame_range(repo, commit, path, start, end)
                continue
            shas = {lines[n] for n in range(start, end + 1) if n in lines}
            out[(path, start, end)] = _newest(repo, shas) if shas else None
    return out
