"""`gitrag gc` on a full disk: gc is what frees space, so deleting files (the data folders of
repositories that no longer exist) goes on when a SQLite write fails, and the message says
what gc did and could not do. The full disk is real: the gc process runs with
RLIMIT_FSIZE (a write that grows a file fails with EFBIG, SQLite's "disk I/O error"),
deletions are not writes; and a real tmpfs filled to its last byte."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitrag import config, identity
from gitrag.git.repo import GitRepo
from tests.gitutil import Repo, index
from tests.reliability import fill, tmpfs


def _gone_repository(tmp_path: Path) -> Path:
    """A second repository, indexed, then deleted 15 days ago (past the 14-day grace gc gives a
    missing git dir): its data folder is what gc must drop."""
    other = Repo(tmp_path / "other")
    other.write("b.py", "def other():\n    return 2\n")
    other.commit("other")
    index(other.path)
    data = config.repo_data_dir(GitRepo(other.path).common_dir)
    assert data.is_dir()
    shutil.rmtree(other.path)
    (data / identity.MISSING_FILE).write_text(f"{time.time() - 15 * 86400:.0f}\n")
    return data


def _full_disk(limit: int) -> Callable[[], None]:
    """A preexec_fn: the child's files may grow to ``limit`` bytes."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _prepare(repo: Repo, tmp_path: Path) -> Path:
    repo.write("a.py", "def here():\n    return 1\n")
    repo.commit("here")
    index(repo.path)
    return _gone_repository(tmp_path)


def test_gc_on_a_full_disk_still_drops_gone_repositories_and_says_what_it_could_not_do(
        repo: Repo, tmp_path: Path) -> None:
    gone = _prepare(repo, tmp_path)
    result = subprocess.run([sys.executable, "-m", "gitrag", "gc", "--repo", str(repo.path)], env=dict(os.environ),
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                            preexec_fn=_full_disk(0))
    assert result.returncode == 1, result.stdout + result.stderr
    assert not gone.exists(), "gc kept the data of a repository that no longer exists"
    err = " ".join(result.stderr.split())
    assert "gitrag gc" in err and "run `gitrag index` again" not in err, err
    assert "disk is full" in err and "cannot write" in err, err
    assert "data of repositories that no longer exist dropped:" in result.stdout
    # space again: gc finishes, and the repository's own index is whole
    again = subprocess.run([sys.executable, "-m", "gitrag", "gc", "--repo", str(repo.path), "--json"],
                           env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["errors"] == []
    assert index(repo.path).to_json()["files_indexed"] == 0  # nothing lost: nothing to do


_STEPS = """
import json, resource, signal, sys
from gitrag.daemon import gc
from gitrag.git.repo import GitRepo
from gitrag.index.workspace import open_workspace
ws = open_workspace(sys.argv[1])
ws.state.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # open: now every write that grows a file fails
print(json.dumps(gc.full_pass(ws, {GitRepo(sys.argv[1]).branch()})))
"""


def test_a_full_pass_whose_database_writes_fail_still_deletes_files(repo: Repo, tmp_path: Path) -> None:
    gone = _prepare(repo, tmp_path)
    proc = subprocess.run([sys.executable, "-c", _STEPS, str(repo.path)], env=dict(os.environ), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not gone.exists() and len(out["repositories_dropped"]) == 1
    failed = {e["step"]: e for e in out["errors"]}
    assert "cache" in failed and failed["cache"]["disk_full"], out
    assert "gitrag index" not in failed["cache"]["error"]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of its own (needs root, as in CI); skipped with the reason elsewhere."""
    with tmpfs(tmp_path / "disk", "256m") as mount:
        yield mount


def test_gc_on_a_really_full_tmpfs_frees_the_space_of_gone_repositories(
        repo: Repo, disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_HOME", str(disk / "home"))
    gone = _prepare(repo, tmp_path)
    fill(disk)  # not a byte left
    result = subprocess.run([sys.executable, "-m", "gitrag", "gc", "--repo", str(repo.path), "--json"],
                            env=dict(os.environ), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            timeout=120, check=False)
    assert not gone.exists(), "gc kept the data of a repository that no longer exists"
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    assert len(out["repositories_dropped"]) == 1
    assert [(e["step"], e["disk_full"]) for e in out["errors"]] == [("open", True)]
    assert "gitrag index" not in out["errors"][0]["error"]
    (disk / "ballast").unlink()  # space again: gc finishes
    again = subprocess.run([sys.executable, "-m", "gitrag", "gc", "--repo", str(repo.path), "--json"],
                           env=dict(os.environ), capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["errors"] == []


def test_gc_through_the_daemon_on_a_full_tmpfs_still_drops_gone_repositories(
        repo: Repo, disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.daemonutil import stop_daemon
    from tests.reliability import start_daemon

    monkeypatch.setenv("GITRAG_HOME", str(disk / "home"))
    gone = _prepare(repo, tmp_path)
    daemon = start_daemon()
    try:
        fill(disk)  # not a byte left
        result = subprocess.run([sys.executable, "-m", "gitrag", "gc", "--repo", str(repo.path), "--json"],
                                env=dict(os.environ), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                timeout=120, check=False)
        assert not gone.exists(), ("gc kept the data of a repository that no longer exists", result.stderr)
        out = json.loads(result.stdout)
        assert len(out["repositories_dropped"]) == 1
        assert result.returncode == (1 if out["errors"] else 0)
        assert all(e["disk_full"] and "gitrag index" not in e["error"] for e in out["errors"]), out["errors"]
    finally:
        (disk / "ballast").unlink(missing_ok=True)
        assert stop_daemon(daemon) == 0
