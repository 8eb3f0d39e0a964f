"""Store and state faults (issue 8): a write that fails half-way, the data folder deleted
under a running daemon, a full disk, an index written by another gitrag version.

Each ends in a clear error with the branch not advanced (or in a recovery), and the next
sync equals a from-scratch index of HEAD: 0 points lost or wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitrag import config
from gitrag.daemon import client
from gitrag.errors import StoreError
from gitrag.git.repo import GitRepo
from gitrag.index.indexer import Indexer
from gitrag.index.state import FORMAT_VERSION
from gitrag.index.store import PointRecord
from gitrag.index.workspace import open_workspace
from tests.daemonutil import stop_daemon, wait_for
from tests.gitutil import Repo
from tests.reliability import (
    commit_b,
    functions,
    indexed_commit,
    lost_wrong,
    pending_repo,
    record,
    run,
    start_daemon,
    sync,
    tmpfs,
)

GROUP = "store and state"


@pytest.fixture
def pending(repo: Repo) -> Repo:
    return pending_repo(repo)


# -- a write that fails half-way ---------------------------------------------------------


class HalfWayStore:
    """Wraps a store; the ``nth`` call of ``op`` applies half of its work, then raises."""

    def __init__(self, inner: Any, op: str, nth: int = 1) -> None:
        self.inner, self.op, self.nth, self.calls = inner, op, nth, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.op:
            return attr
        return lambda *args, **kwargs: self._maybe_fail(attr, *args, **kwargs)

    def _maybe_fail(self, fn: Any, name: str, *rest: Any) -> Any:
        self.calls += 1
        if self.calls != self.nth:
            return fn(name, *rest)
        work = rest[0] if rest else None
        if isinstance(work, list) and work and isinstance(work[0], (PointRecord, str)):
            fn(name, work[: len(work) // 2], *rest[1:])  # half of the points or ids, then the failure
        elif isinstance(work, dict) and work:
            fn(name, dict(list(work.items())[: len(work) // 2]))
        raise StoreError(f"simulated failure half-way through {self.op}")


HALF_WAY = [("upsert", 1), ("upsert", 2), ("delete", 1), ("set_payload_of", 1), ("flush", 1)]


@pytest.mark.parametrize(("op", "nth"), HALF_WAY)
def test_a_store_write_failing_half_way(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        op: str, nth: int) -> None:
    monkeypatch.setattr("gitrag.index.indexer.UPSERT_BATCH", 8)  # several upsert calls per sync
    a = indexed_commit(pending.path)
    with open_workspace(pending.path) as ws:
        failing = HalfWayStore(ws.store, op, nth)
        with pytest.raises(StoreError, match="half-way"):
            Indexer(replace(ws, store=failing)).sync()
        assert failing.calls >= nth
        assert ws.state.branch("main").indexed_commit == a
        assert ws.state.journal_paths("main")  # the next sync knows what to repair
    sync(pending.path)
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record(f"store {op} #{nth} fails half-way", "StoreError, branch not advanced, journal kept; "
           "next sync repairs", lost, wrong, GROUP)


def test_a_failure_while_repairing_a_failure(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_workspace(pending.path) as ws:
        with pytest.raises(StoreError):
            Indexer(replace(ws, store=HalfWayStore(ws.store, "upsert"))).sync()
        with pytest.raises(StoreError):  # the repair itself fails half-way
            Indexer(replace(ws, store=HalfWayStore(ws.store, "delete_path", 2))).sync()
    sync(pending.path)
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("a second store failure during the repair of the first", "StoreError twice; third sync repairs",
           lost, wrong, GROUP)


# -- an index from another gitrag version ----------------------------------------------------


def _set_format(repo: Repo, version: int) -> None:
    path = config.repo_data_dir(GitRepo(repo.path).common_dir) / "state.db"
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value=? WHERE key='format'", (str(version),))


def test_an_index_from_another_version_is_rebuilt(pending: Repo, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _set_format(pending, 0)  # a format no release converts (format 1 is migrated: tests/test_storage.py)
    for args in (["index"], ["ask", "alpha"], ["status"]):
        proc = run(*args, "--repo", str(pending.path))
        assert proc.returncode == 1 and "gitrag index --rebuild" in proc.stderr, (args, proc.stderr)
    proc = run("index", "--rebuild", "--json", "--repo", str(pending.path))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["chunks_embedded"] > 0  # pending B's chunks (A's are in the shared cache)
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("index written by an older gitrag (format version)", "exit 1: run `gitrag index --rebuild`; "
           "which rebuilds it", lost, wrong, GROUP)


def test_an_index_from_another_version_is_rebuilt_through_the_daemon(
        pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _set_format(pending, FORMAT_VERSION + 1)  # a newer gitrag wrote it
    daemon = start_daemon()
    try:
        proc = run("index", "--repo", str(pending.path))
        assert proc.returncode == 1 and "gitrag index --rebuild" in proc.stderr, proc.stderr
        proc = run("index", "--rebuild", "--repo", str(pending.path))
        assert proc.returncode == 0, proc.stderr
        assert client.request("ask", repo=str(pending.path), question="alpha")["results"]
    finally:
        assert stop_daemon(daemon) == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("index from another version, daemon running", "exit 1 with the hint; `--rebuild` through the "
           "daemon rebuilds it", lost, wrong, GROUP)


# -- the data folder deleted under a running daemon ----------------------------------------


def _data_dir(repo: Repo) -> Path:
    return config.repo_data_dir(GitRepo(repo.path).common_dir)


def test_data_folder_deleted_while_the_daemon_runs(pending: Repo, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = start_daemon()
    try:
        client.request("index", timeout=60, repo=str(pending.path))
        shutil.rmtree(_data_dir(pending))
        pending.write("pkg/after.py", functions("after", 2))
        pending.commit("C")
        summary = client.request("index", timeout=60, repo=str(pending.path))
        assert summary["previous_commit"] is None  # started over: a full index
        answer = client.request("ask", repo=str(pending.path), question="after_1", mode="sparse")
        assert answer["results"][0]["path"] == "pkg/after.py"
    finally:
        assert stop_daemon(daemon) == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("data folder deleted while the daemon runs", "the daemon notices, reopens and indexes from "
           "scratch", lost, wrong, GROUP)


def test_data_folder_deleted_during_a_sync(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = {"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 0.2]]}
    daemon = start_daemon(prelude=slow, env={"GITRAG_BATCH_SIZE": "2"})
    try:
        cached = _vectors_cached(pending)
        result: list[str] = []
        thread = threading.Thread(target=lambda: result.append(_index_quietly(pending)))
        thread.start()
        wait_for(lambda: _vectors_cached(pending) > cached, "the sync to embed something")
        wait_for(lambda: _removed(_data_dir(pending)), "the data folder to be deleted")
        thread.join(60)
        summary = client.request("index", timeout=60, repo=str(pending.path))
        assert summary["commit"] == pending.head()
    finally:
        assert stop_daemon(daemon) == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("data folder deleted during a sync", f"that sync {result[0]}; the next one indexes from scratch",
           lost, wrong, GROUP)


def _removed(folder: Path) -> bool:
    """Delete ``folder``; False if the daemon created a file in it meanwhile (try again)."""
    try:
        shutil.rmtree(folder)
    except OSError:
        return False
    return True


def _vectors_cached(repo: Repo) -> int:
    path = config.data_root() / "cache.db"  # the vector cache shared by the user's repositories
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM vectors").fetchone()[0])
    except sqlite3.Error:
        return 0


def _index_quietly(repo: Repo) -> str:
    try:
        client.request("index", timeout=60, repo=str(repo.path))
    except client.CommandError as exc:
        return f"failed with a {exc.kind} (its collection vanished under it)"
    return "completed"


# -- a full disk ------------------------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs of its own (needs root, as in CI); skipped with the reason elsewhere."""
    with tmpfs(tmp_path / "disk", "2m") as mount:
        yield mount


def _resize(mount: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)


def _leave_free(mount: Path, free: int) -> Path:
    """Fill the disk with a ballast file until ``free`` bytes are left."""
    st = os.statvfs(mount)
    ballast = mount / "ballast"
    with open(ballast, "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, max(0, st.f_bavail * st.f_frsize - free))
    return ballast


def _assert_clean_failure(proc: subprocess.CompletedProcess[str]) -> None:
    """Exit 1 (no crash, no signal, no traceback) with a line saying the disk is full."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "full" in proc.stderr and "free space" in proc.stderr and "Traceback" not in proc.stderr


def test_disk_full_from_the_start(repo: Repo, disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("pkg/a.py", functions("alpha", 6))
    repo.commit("A")
    monkeypatch.setenv("GITRAG_HOME", str(disk / "home"))
    _assert_clean_failure(run("index", "--json", "--repo", str(repo.path)))
    assert indexed_commit(repo.path) is None
    _resize(disk, "512m")  # space freed
    assert run("index", "--repo", str(repo.path)).returncode == 0
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("full disk (2 MB tmpfs) from the start", "exit 1: the disk is full, free space; "
           "after freeing, index converges", lost, wrong, GROUP)


@pytest.mark.parametrize("free", [64 * 1024, 8 * 2**20])
def test_disk_fills_up_before_a_sync(pending: Repo, disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     free: int) -> None:
    _resize(disk, "512m")
    monkeypatch.setenv("GITRAG_HOME", str(disk / "home"))
    pending.git("checkout", "-q", "HEAD~1")
    pending.git("checkout", "-q", "-B", "main")  # back at A: index it on the tmpfs
    a = pending.head()
    assert run("index", "--repo", str(pending.path)).returncode == 0
    commit_b(pending)
    ballast = _leave_free(disk, free)
    _assert_clean_failure(run("index", "--json", "--repo", str(pending.path)))
    assert indexed_commit(pending.path) == a
    ballast.unlink()
    assert run("index", "--repo", str(pending.path)).returncode == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record(f"disk full during a sync ({free // 1024} KB left)", "exit 1: the disk is full, free space; "
           "branch not advanced; after freeing, converges", lost, wrong, GROUP)
