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


def test_a_large_sync_closes_the_shards_and_the_next_read_reopens_them(repo, monkeypatch) -> None:
    from gitrag.daemon import worker as worker_mod
    from gitrag.daemon.worker import RepoWorker
    from gitrag.index.workspace import open_workspace
    from gitrag.query.retrieval import search

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


def _mapping_rss_kib(path: str) -> int:
    """Resident KiB of this process's mappings of ``path`` (from /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
                inside = len(fields) >= 6 and fields[5] == path
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@glibc
def test_dropping_file_pages_unmaps_them_and_keeps_their_bytes(tmp_path) -> None:
    import mmap

    root = tmp_path / "store"
    root.mkdir()
    shared, private = root / "segment.dat", root / "private.dat"
    shared.write_bytes(bytes(range(256)) * 32768)  # 8 MiB
    private.write_bytes(b"\0" * (1 << 20))
    outside = tmp_path / "outside.dat"
    outside.write_bytes(b"\1" * (1 << 20))
    with shared.open("r+b") as fs, private.open("r+b") as fp, outside.open("r+b") as fo:
        seg = mmap.mmap(fs.fileno(), 0)  # MAP_SHARED, writable: how the engine maps segments and WAL
        cow = mmap.mmap(fp.fileno(), 0, flags=mmap.MAP_PRIVATE)  # private writable: its written pages are its own
        other = mmap.mmap(fo.fileno(), 0)
        try:
            seg[:4] = b"LIVE"  # a write not yet flushed to the file
            cow[:4] = b"MINE"
            assert sum(seg[i] for i in range(0, len(seg), 4096)) and other[0] == 1
            assert [p for _, _, p in memory.file_mappings(root)] == [str(shared)]  # not the private one, not outside
            assert _mapping_rss_kib(str(shared)) > 7_000 and _mapping_rss_kib(str(outside)) > 0
            assert memory.drop_file_pages(root) == len(seg)
            assert _mapping_rss_kib(str(shared)) < 100  # unmapped from the process
            assert _mapping_rss_kib(str(outside)) > 0  # other files untouched
            assert seg[:4] == b"LIVE" and seg[4:8] == bytes(range(4, 8))  # faulted back from the page cache
            assert cow[:4] == b"MINE"
        finally:
            seg.close()
            cow.close()
            other.close()
    assert shared.read_bytes()[:4] == b"LIVE"


def test_clearing_the_caches_empties_the_sparse_term_caches() -> None:
    from gitrag.index import sparse

    sparse.document_vector("def parse_args(argv): return ArgumentParser(prog).parse_known_args(argv)")
    cached = [f for f in vars(sparse).values() if hasattr(f, "cache_info")]
    assert cached and any(f.cache_info().currsize for f in cached)
    assert memory.clear_caches() > 0
    assert all(f.cache_info().currsize == 0 for f in cached)


def _forty_module_worker(repo, monkeypatch):
    """A daemon worker for ``repo`` after a commit of forty small modules, its shards kept open
    after a sync (the pages its questions touch are the ones a release gives back)."""
    from gitrag.daemon import worker as worker_mod
    from gitrag.daemon.worker import RepoWorker
    from gitrag.index.workspace import open_workspace

    for i in range(40):
        repo.write(f"pkg/m{i}.py", f"def handler_{i}(request):\n    return request.reply({i})\n")
    repo.commit("forty modules")
    monkeypatch.setattr(worker_mod, "CLOSE_AFTER_POINTS", 10_000)  # the shard stays open
    return RepoWorker(str(repo.path / ".git"), lambda path, rebuild=False: open_workspace(path))


def test_a_sync_in_the_daemon_drops_the_store_pages_it_touched(repo, monkeypatch) -> None:
    from gitrag.query.retrieval import search

    worker = _forty_module_worker(repo, monkeypatch)
    try:
        assert worker.sync_now(str(repo.path))["points_upserted"] > 0
        ws = worker.workspace(str(repo.path))
        assert ws.store._shards
        mapped = memory.file_mappings(ws.store.root)
        assert mapped  # the open shard maps its files
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            assert sum(_mapping_rss_kib(p) for p in {p for _, _, p in mapped}) < 100
        assert search(ws, "handler_7", k=3)  # the shard still answers, its pages faulted back
    finally:
        worker.close()


def _sqlite_memory_used() -> int | None:
    """Bytes SQLite has allocated in this process (``sqlite3_memory_used``), if the sqlite3
    module uses the system's shared library."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return int(lib.sqlite3_memory_used())


def test_shrinking_sqlite_frees_its_page_cache(tmp_path) -> None:
    import sqlite3

    db = sqlite3.connect(tmp_path / "x.db", check_same_thread=False)
    db.execute("PRAGMA cache_size=-8000")  # up to 8 MB of pages
    db.execute("CREATE TABLE t(v BLOB)")
    db.executemany("INSERT INTO t VALUES(?)", [(bytes(3000),) for _ in range(1500)])
    db.commit()
    db.execute("SELECT count(*), sum(length(v)) FROM t").fetchone()  # ~4.5 MB of pages cached now
    closed = sqlite3.connect(tmp_path / "y.db")
    closed.close()
    before = _sqlite_memory_used()
    if before is None:
        pytest.skip("the sqlite3 module does not use a shared libsqlite3 here")
    assert memory.shrink_sqlite([db, None, closed]) == 1  # the open one; None and a closed one skipped
    assert before - (_sqlite_memory_used() or 0) > 3_000_000
    assert db.execute("SELECT count(*) FROM t").fetchone() == (1500,)  # still usable
    db.close()


@glibc
def test_the_static_model_is_mapped_not_copied_and_its_pages_can_be_dropped() -> None:
    import numpy as np

    from gitrag.index.embedders.static import StaticEmbedder

    emb = StaticEmbedder()
    texts = [f"def handler_{i}(request, response): return parse_{i}(request.body)" for i in range(200)]
    first = emb.embed_documents(texts)
    vectors, _ = emb._get_vectors()
    assert isinstance(vectors, np.memmap) and vectors.dtype == np.float16  # the file's pages, no float32 copy
    model_file = str((emb.path / "model.safetensors").resolve())
    assert any(p == model_file for _, _, p in memory.file_mappings(emb.path))
    np.asarray(vectors).sum(dtype=np.float64)  # every row resident
    assert _mapping_rss_kib(model_file) > 10_000
    assert memory.drop_file_pages(emb.path) > 0
    assert _mapping_rss_kib(model_file) < 1_000
    assert np.array_equal(emb.embed_documents(texts), first)  # faulted back, same vectors


def test_the_adapters_that_map_files_say_so_by_a_named_method(tmp_path) -> None:
    from gitrag.index.embedders.static import StaticEmbedder
    from gitrag.index.state import State
    from gitrag.index.store.edge import EdgeStore

    store, emb = EdgeStore(tmp_path / "store"), StaticEmbedder()
    assert isinstance(store, memory.MapsFiles) and store.mapped_files()[0] == tmp_path / "store"
    assert isinstance(emb, memory.MapsFiles) and emb.mapped_files() == (emb.path, None)
    assert not isinstance(object(), memory.MapsFiles)  # an adapter that maps nothing is passed over
    state = State(tmp_path / "data", cache_path=tmp_path / "cache.db")
    try:
        assert len(state.connections()) == 2  # the state's and the vector cache's; no planner yet
        memory.release(state.connections(), [store, emb, None, object()])  # None and a plain object: passed over
        assert state.connections()[0].execute("SELECT 1").fetchone() == (1,)  # still open
    finally:
        state.close()


def test_an_idle_worker_gives_back_the_store_pages_its_questions_touched(repo, monkeypatch) -> None:
    import asyncio

    from gitrag.query.retrieval import search

    worker = _forty_module_worker(repo, monkeypatch)

    async def ask(query: str) -> int:
        return len(await worker.read(lambda: search(worker.workspace(str(repo.path)), query, k=3)))

    async def scenario() -> None:
        assert await asyncio.wait_for(worker.serial(worker.sync_now, str(repo.path)), 120)
        assert await ask("handler_7")  # a question: the shard's pages are resident again
        mapped = {p for _, _, p in memory.file_mappings(worker.workspace(str(repo.path)).store.root)}
        touched = sum(_mapping_rss_kib(p) for p in mapped)
        assert worker.idle_for() is not None and not worker.release_if_idle(after_s=3600)  # not idle long enough
        assert worker.release_if_idle(after_s=0)
        if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
            assert touched > 0 and sum(_mapping_rss_kib(p) for p in mapped) < touched
        assert worker.idle_for() is None and not worker.release_if_idle(after_s=0)  # once per idle spell
        assert await ask("handler_9")  # answers, its pages faulted back; a use starts a new spell
        assert worker.idle_for() is not None
        worker.mark(str(repo.path))  # a sync queued: nothing is released under it
        assert worker.idle_for() is None and not worker.release_if_idle(after_s=0)

    try:
        asyncio.run(scenario())
    finally:
        worker.dirty.clear()
        worker.close()
