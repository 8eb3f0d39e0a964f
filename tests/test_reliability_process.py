"""Process faults (issue 8): SIGKILL of ``gitrag index`` and of the daemon in the middle of a
sync, at named points and at random moments, then a restart: the index equals a
from-scratch index of HEAD (0 points lost or wrong). Many ``ask`` clients during a sync are
all answered. (Two daemons started at once: tests/test_daemon.py,
test_one_daemon_wins_and_a_stale_socket_is_replaced.)

The kills come from outside gitrag: tests/prelude.py wraps a method in the subprocess so
that its n-th call SIGKILLs the process, before or after the call runs.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gitrag import config
from gitrag.daemon import client
from gitrag.git.repo import GitRepo
from tests.daemonutil import stop_daemon
from tests.gitutil import Repo
from tests.reliability import (
    commit_a,
    indexed_commit,
    lost_wrong,
    pending_repo,
    record,
    run,
    spawn,
    start_daemon,
)

GROUP = "process"
SMALL_BATCHES = ["gitrag.index.indexer", "UPSERT_BATCH", 8]  # several upserts per sync: one can be cut
SLOW_EMBED = ["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 0.1]
SLOW_UPSERT = ["gitrag.index.store.edge:EdgeStore.upsert", 0.2]

# (where, target, nth call, before/after it): in the order a sync reaches them
KILL_POINTS = [
    ("embedding: after the first vectors were cached", "gitrag.index.state:State.put_vectors", 1, "after"),
    ("journal written, store not yet touched", "gitrag.index.state:State.write_journal", 1, "after"),
    ("half-way through the upserts", "gitrag.index.store.edge:EdgeStore.upsert", 2, "after"),
    ("after deleting orphans, before membership updates", "gitrag.index.store.edge:EdgeStore.delete", 1, "after"),
    ("after membership updates, before the flush", "gitrag.index.store.edge:EdgeStore.set_payload_of", 1, "after"),
    ("store flushed, state not yet committed", "gitrag.index.store.edge:EdgeStore.flush", 1, "after"),
    ("state committed, before the reply", "gitrag.index.state:State.commit_paths", 1, "after"),
]


@pytest.fixture
def pending(repo: Repo) -> Repo:
    return pending_repo(repo)


def _expected_commit(target: str, repo: Repo) -> str:
    """Where the branch must stand after the kill: advanced only once the state committed."""
    return repo.head() if target.endswith("commit_paths") else repo.git("rev-parse", "HEAD~1")


@pytest.mark.parametrize(("where", "target", "nth", "when"), KILL_POINTS, ids=[p[1].rsplit(".", 1)[-1] for p in KILL_POINTS])
def test_sigkill_of_gitrag_index(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 where: str, target: str, nth: int, when: str) -> None:
    prelude = {"set": [SMALL_BATCHES], "kill": [[target, nth, when]]}
    proc = run("index", "--repo", str(pending.path), prelude=prelude)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-1500:])
    assert indexed_commit(pending.path) == _expected_commit(target, pending)
    assert run("index", "--repo", str(pending.path)).returncode == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record(f"SIGKILL of `gitrag index`: {where}", "next `gitrag index` repairs from the journal", lost, wrong, GROUP)


def test_sigkill_during_the_repair_of_a_sigkill(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = {"set": [SMALL_BATCHES], "kill": [["gitrag.index.store.edge:EdgeStore.upsert", 2, "after"]]}
    assert run("index", "--repo", str(pending.path), prelude=first).returncode == -signal.SIGKILL
    second = {"kill": [["gitrag.index.store.edge:EdgeStore.delete_path", 3, "after"]]}  # inside the repair
    assert run("index", "--repo", str(pending.path), prelude=second).returncode == -signal.SIGKILL
    assert run("index", "--repo", str(pending.path)).returncode == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("SIGKILL during the repair of a SIGKILL", "the third run repairs both", lost, wrong, GROUP)


def test_sigkill_at_random_moments(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four kills in a row at growing delays (a slow model makes the sync last ~2 s), no
    recovery in between, then one clean run."""
    prelude = {"set": [SMALL_BATCHES], "sleep": [SLOW_EMBED, SLOW_UPSERT]}
    env = {"GITRAG_BATCH_SIZE": "2"}
    outcomes = []
    for delay in (0.9, 1.2, 1.5, 1.8):
        proc = spawn("index", "--repo", str(pending.path), prelude=prelude, env=env)
        time.sleep(delay)  # not an assertion: where the kill lands is the variable under test
        proc.send_signal(signal.SIGKILL)
        outcomes.append(_landed(pending) if proc.wait(30) == -signal.SIGKILL else "finished first")
    assert run("index", "--repo", str(pending.path)).returncode == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("SIGKILL of `gitrag index` at 0.9/1.2/1.5/1.8 s, in a row", f"{', '.join(outcomes)}; "
           "the next run converges", lost, wrong, GROUP)


def _landed(repo: Repo) -> str:
    """Where a kill landed, judged from what it left: the branch advanced, a journal, or neither."""
    if indexed_commit(repo.path) == repo.head():
        return "killed after the commit"
    path = config.repo_data_dir(GitRepo(repo.path).common_dir) / "state.db"
    with sqlite3.connect(path) as db:
        journaled = db.execute("SELECT count(*) FROM journal").fetchone()[0]
    return "killed writing the store" if journaled else "killed before writing the store"


DAEMON_KILLS = [KILL_POINTS[0], KILL_POINTS[2], KILL_POINTS[5]]


@pytest.mark.parametrize(("where", "target", "nth", "when"), DAEMON_KILLS, ids=[p[1].rsplit(".", 1)[-1] for p in DAEMON_KILLS])
def test_sigkill_of_the_daemon_during_a_sync(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             where: str, target: str, nth: int, when: str) -> None:
    doomed = start_daemon(prelude={"set": [SMALL_BATCHES], "kill": [[target, nth, when]]})
    try:
        with pytest.raises(client.DaemonError):
            client.request("index", timeout=60, repo=str(pending.path))
        assert doomed.wait(30) == -signal.SIGKILL
    finally:
        stop_daemon(doomed)
    assert indexed_commit(pending.path) == _expected_commit(target, pending)
    daemon = start_daemon()  # replaces the dead daemon's socket; its lock died with it
    try:
        summary = client.request("index", timeout=60, repo=str(pending.path))
        assert summary["commit"] == pending.head()
    finally:
        assert stop_daemon(daemon) == 0
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record(f"SIGKILL of the daemon: {where}", "restarted daemon repairs on the next sync", lost, wrong, GROUP)


def test_many_ask_clients_during_a_sync(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = start_daemon(prelude={"sleep": [SLOW_EMBED]}, env={"GITRAG_BATCH_SIZE": "2"})
    answers: list[Any] = []
    errors: list[str] = []
    try:
        syncing = threading.Thread(target=lambda: client.request("index", timeout=120, repo=str(pending.path)))
        syncing.start()

        def asker(i: int) -> None:
            while syncing.is_alive():
                try:
                    reply = client.request("ask", timeout=30, repo=str(pending.path), question=f"alpha_{i % 6}", k=3)
                    answers.append(reply)
                except client.DaemonError as exc:
                    errors.append(repr(exc))

        askers = [threading.Thread(target=asker, args=(i,)) for i in range(12)]
        for t in askers:
            t.start()
        for t in [syncing, *askers]:
            t.join(120)
    finally:
        assert stop_daemon(daemon) == 0
    assert errors == [] and len(answers) >= 12
    assert all(a["results"] for a in answers)
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("12 concurrent `ask` clients during a sync", f"{len(answers)} asks, all answered, 0 errors",
           lost, wrong, GROUP)



SMALL_SYNC_BATCHES = ["gitrag.index.indexer", "BATCH_FILES", 2]  # a sync in batches of 2 paths: it can die between two


@pytest.mark.parametrize("head_moves", [False, True], ids=["same-head", "head-reverts-the-done-batch"])
def test_sigkill_between_two_batches_of_a_sync(pending: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               head_moves: bool) -> None:
    """The sync of commit B dies after its first batch (pkg/a.py edited, pkg/b.py deleted) is
    in the store and the manifest, before the second; with ``head_moves`` the next commit
    puts both paths back as they were in A, so only the journal says they were redone."""
    prelude = {"set": [SMALL_SYNC_BATCHES], "kill": [["gitrag.index.state:State.commit_batch", 1, "after"]]}
    proc = run("index", "--repo", str(pending.path), prelude=prelude)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-1500:])
    a = pending.git("rev-parse", "HEAD~1")
    assert indexed_commit(pending.path) == a  # the branch advances only with the last batch
    if head_moves:
        pending.git("checkout", "-q", a, "--", "pkg/a.py", "pkg/b.py")
        pending.commit("C: a.py and b.py as in A")
    assert run("index", "--repo", str(pending.path)).returncode == 0
    assert indexed_commit(pending.path) == pending.head()
    lost, wrong = lost_wrong(pending.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    outcome = "next `gitrag index` redoes the journaled batch" + (" at a HEAD that reverted it" if head_moves else "")
    record("SIGKILL of `gitrag index` between two batches of a sync" + (", then a commit reverting the done batch"
           if head_moves else ""), outcome, lost, wrong, GROUP)


def test_sigkill_between_two_batches_of_a_first_index(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    prelude = {"set": [["gitrag.index.indexer", "BATCH_FILES", 1]], "kill": [["gitrag.index.state:State.commit_batch", 2, "after"]]}
    proc = run("index", "--repo", str(repo.path), prelude=prelude)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-1500:])
    assert indexed_commit(repo.path) is None
    assert run("index", "--repo", str(repo.path)).returncode == 0
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record("SIGKILL of a first `gitrag index` after its second batch", "next `gitrag index` finishes it",
           lost, wrong, GROUP)
