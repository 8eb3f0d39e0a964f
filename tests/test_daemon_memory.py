"""The daemon's memory release: glibc's arena cap and malloc_trim are really called."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from gitrag.daemon import memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                           reason="malloc_trim and M_ARENA_MAX are glibc's")


@glibc
def test_trim_gives_freed_heap_pages_back_to_the_system() -> None:
    # a fresh process: fill glibc's heap with 1.5 KB objects (past pymalloc's 512 bytes), free all
    # but the last (which pins the heap's top, so free() alone cannot shrink it), trim: RSS drops
    script = (
        "import sys\n"
        "from gitrag.daemon import memory\n"
        "def rss():\n"
        "    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1])\n"
        "assert memory.limit_arenas()\n"
        "junk = [bytes(1500) for _ in range(60_000)]\n"
        "keep = junk[-1:]\n"
        "del junk\n"
        "before = rss()\n"
        "trimmed = memory.trim()\n"
        "print(before, rss(), trimmed)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    before, after, trimmed = proc.stdout.split()
    assert trimmed == "True" and int(after) < int(before) - 50_000  # KiB: over 50 MB handed back


def test_a_large_sync_closes_the_shards_and_the_next_read_reopens_them(repo, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gitrag.daemon import worker as worker_mod
    from gitrag.daemon.worker import RepoWorker
    from gitrag.retrieval import search
    from gitrag.workspace import open_workspace

    for i in range(3):
        repo.write(f"pkg/m{i}.py", f"def handler_{i}(request):\n    return request.reply({i})\n")
    repo.commit("three modules")
    worker = RepoWorker(str(repo.path / ".git"), lambda path, rebuild=False: open_workspace(path))
    try:
        monkeypatch.setattr(worker_mod, "CLOSE_AFTER_POINTS", 10_000)
        assert worker.sync_now(str(repo.path))["points_upserted"] > 0
        ws = worker.workspace(str(repo.path))
        assert ws.store._shards  # a small sync keeps the shard warm for the next query
        repo.write("pkg/m3.py", "def handler_3(request):\n    return request.reply(3)\n")
        repo.commit("one more")
        monkeypatch.setattr(worker_mod, "CLOSE_AFTER_POINTS", 1)
        assert worker.sync_now(str(repo.path))["points_upserted"] > 0
        assert not ws.store._shards  # closed: the engine's heap copy of the new points is gone
        hits = search(ws, "handler_3", k=3)
        assert hits and ws.store._shards  # reopened lazily from disk
    finally:
        worker.close()
