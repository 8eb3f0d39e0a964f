"""A repository folder moved (or deleted) while the daemon runs: real repositories, a real
``gitrag install --no-systemd`` (and its background daemon), a real ``mv``.

The index follows its repository (README: "An index follows its repository when the folder
is moved"): ask, index and install in the new folder go through the daemon, which keeps the
repository's worker (and its open store) instead of opening the store a second time and
waiting on its own lock; the registry follows a moved repository and drops a gone one, so
the last live repository's uninstall stops the daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from gitrag import config
from gitrag.daemon import client, registry
from tests.daemonutil import gitrag, gitrag_json, indexed_at, wait_for
from tests.gitutil import Repo

WAITING = "the store is open in another process; waiting"


def _at(path: Path) -> Repo:
    """The repository now at ``path`` (moved there), without running ``git init`` again."""
    repo = Repo.__new__(Repo)
    repo.path = path
    return repo


def _project(path: Path, name: str = "billing") -> Repo:
    repo = Repo(path)
    repo.write(f"{name}.py", f"def compute_{name}_total(items):\n    return sum(i.price for i in items)\n")
    repo.commit("first")
    return repo


def _installed(tmp_path: Path, *names: str) -> list[Repo]:
    """One project per name under ``tmp_path``, each installed (hooks, registry, daemon), not indexed."""
    repos = [_project(tmp_path / name, name) for name in names]
    for repo in repos:
        gitrag("install", "--no-systemd", "--no-index", cwd=repo.path)
    return repos


def _registered() -> set[str]:
    return set(registry.load())


def _git_dir(path: Path) -> str:
    return str((path / ".git").resolve())


def _daemon_log() -> str:
    log = config.state_dir() / "daemon.log"
    return log.read_text(errors="replace") if log.exists() else ""


def test_ask_index_and_install_work_in_the_new_folder_after_a_move(tmp_path: Path) -> None:
    old = _project(tmp_path / "mv1")
    gitrag("install", "--no-systemd", cwd=old.path)
    try:
        new_path = tmp_path / "mv2"
        shutil.move(old.path, new_path)
        new = _at(new_path)

        asked = gitrag("ask", "compute billing total", "--no-answer", "--json", cwd=new_path, check=False)
        assert asked.returncode == 0, asked.stderr
        assert [r["path"] for r in json.loads(asked.stdout)["results"]][:1] == ["billing.py"]
        indexed = gitrag("index", "--json", cwd=new_path, check=False)
        assert indexed.returncode == 0, indexed.stderr
        installed = gitrag("install", "--no-systemd", cwd=new_path, check=False)
        assert installed.returncode == 0, installed.stderr
        assert _registered() == {_git_dir(new_path)}  # the entry followed; the old path is gone

        # the hooks in the moved folder keep the index current (the daemon serves the new place)
        new.write("refunds.py", "def issue_refund(order):\n    return -order.total\n")
        head = new.commit("refunds")
        wait_for(lambda: indexed_at(new_path, head), "the commit in the moved folder to be indexed")
        assert gitrag_json("ask", "issue refund", "--no-answer", cwd=new_path)["results"][0]["path"] == "refunds.py"
        # one worker kept the store: no second open, no wait on its own lock
        assert _daemon_log().count(WAITING) == 0, _daemon_log()[-2000:]
    finally:
        gitrag("daemon", "--stop")


def test_a_commit_right_after_the_move_is_indexed_and_the_registry_follows(tmp_path: Path) -> None:
    old = _project(tmp_path / "mv1")
    gitrag("install", "--no-systemd", cwd=old.path)
    try:
        new_path = tmp_path / "moved" / "mv2"
        new_path.parent.mkdir()
        shutil.move(old.path, new_path)
        new = _at(new_path)
        new.write("ledger.py", "def reconcile_ledger(rows):\n    return sorted(rows)\n")
        head = new.commit("ledger")  # no gitrag command ran in the new folder: only its hook
        wait_for(lambda: indexed_at(new_path, head), "the commit in the moved folder to be indexed")
        assert _registered() == {_git_dir(new_path)}
        assert registry.load()[_git_dir(new_path)]["hooks"] == str(Path(_git_dir(new_path)) / "hooks")
    finally:
        gitrag("daemon", "--stop")


def test_gc_prunes_registry_entries_of_moved_and_deleted_repositories(tmp_path: Path) -> None:
    keep, gone, moved = _installed(tmp_path, "keep", "gone", "moved")
    gitrag("daemon", "--stop")  # in-process: nothing routes the moved repository to a daemon
    old_moved = _git_dir(moved.path)
    old_gone = _git_dir(gone.path)
    shutil.rmtree(gone.path)
    shutil.move(moved.path, tmp_path / "elsewhere")
    gitrag("index", cwd=tmp_path / "elsewhere")  # opened at its new place: its data folder records it
    assert old_gone in _registered() and old_moved in _registered()

    result = gitrag_json("gc", cwd=keep.path)
    pruned = sorted(result["registrations_pruned"], key=lambda c: c["repo"])
    assert pruned == sorted([{"repo": old_gone, "moved_to": None},
                             {"repo": old_moved, "moved_to": _git_dir(tmp_path / "elsewhere")}],
                            key=lambda c: c["repo"])
    assert _registered() == {_git_dir(keep.path), _git_dir(tmp_path / "elsewhere")}
    assert gitrag_json("gc", cwd=keep.path)["registrations_pruned"] == []


def test_a_new_repository_at_the_old_path_is_not_taken_for_the_moved_one(tmp_path: Path) -> None:
    first = _project(tmp_path / "proj")
    gitrag("install", "--no-systemd", "--no-index", cwd=first.path)
    gitrag("daemon", "--stop")
    shutil.move(first.path, tmp_path / "proj-old")
    _project(tmp_path / "proj", "other")  # another repository where the first one was
    result = gitrag_json("gc", cwd=tmp_path / "proj-old")  # opens it there: its data folder records it
    assert result["registrations_pruned"] == [{"repo": _git_dir(tmp_path / "proj"),
                                               "moved_to": _git_dir(tmp_path / "proj-old")}]
    assert _registered() == {_git_dir(tmp_path / "proj-old")}


def test_the_daemon_prunes_a_deleted_repository_itself(tmp_path: Path, daemons: Any) -> None:
    daemons("--reconcile", "1")
    keep, gone = _installed(tmp_path, "keep", "gone")
    shutil.rmtree(gone.path)
    wait_for(lambda: _registered() == {_git_dir(keep.path)}, "the daemon to drop the deleted repository")


def test_uninstall_in_the_last_live_repository_stops_the_daemon(tmp_path: Path) -> None:
    last, moved, deleted = _installed(tmp_path, "last", "moved", "deleted")
    shutil.move(moved.path, tmp_path / "moved-away")  # nothing ran there: its entry is gone too
    shutil.rmtree(deleted.path)
    out = gitrag("uninstall", cwd=last.path)
    assert "stopped the gitrag daemon" in out.stdout, out.stdout + out.stderr
    assert not client.probe()["running"]
    assert _registered() == set()


def test_a_lock_wait_backs_off_logs_once_and_ends_when_the_repository_is_gone(tmp_path: Path, daemons: Any) -> None:
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    proc = daemons()
    repo = _project(tmp_path / "repo")
    gitrag("install", "--no-systemd", "--no-index", cwd=repo.path)
    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log")  # start_daemon's
    ws = open_workspace(repo.path)  # this process holds the store's shard lock from here on
    try:
        Indexer(ws).sync()
        repo.write("late.py", "def late():\n    return 1\n")
        repo.commit("late")  # the hook's sync finds the store held
        wait_for(lambda: WAITING in log.read_text(errors="replace"), "the daemon to wait for the store")
        time.sleep(3.0)  # the lock stays held for a while (a wait used to log every 0.2 s)
        assert log.read_text(errors="replace").count(WAITING) == 1
        shutil.rmtree(repo.path)  # the repository is gone: nothing to wait for any more
        gave_up = ("work tree gone", "sync failed")
        wait_for(lambda: any(w in log.read_text(errors="replace") for w in gave_up), "the daemon to give up the wait")
    finally:
        ws.close()
    assert proc.poll() is None
