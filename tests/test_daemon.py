"""The daemon end to end: real repositories, real hooks firing, a real daemon process.

Every wait polls with a deadline (tests.daemonutil.wait_for); nothing sleeps to assert.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gitrag import config
from gitrag.daemon import client, protocol, registry, spool
from gitrag.daemon.server import SocketInUse, clear_stale, dispatch, peer_uid, serve
from gitrag.errors import NotIndexed
from gitrag.git.repo import GitRepo
from tests.daemonutil import gitrag, gitrag_json, indexed_at, stop_daemon, wait_for
from tests.gitutil import Repo


def _status_up_to_date(path: Path, branch: str, head: str) -> None:
    """`gitrag status --json` (the CLI, through the daemon) says ``branch`` is current and indexed at ``head``."""
    data = gitrag_json("status", "--repo", str(path))
    assert data["daemon"]["running"]
    (entry,) = data["repos"]
    assert Path(entry["path"]) == path.resolve() and entry["branch"] == branch
    (b,) = [b for b in entry["branches"] if b["current"]]
    assert (b["name"], b["indexed_commit"], b["up_to_date"]) == (branch, head, True)


def _settle(path: Path, branch: str, head: str) -> dict[str, Any]:
    data = wait_for(lambda: indexed_at(path, head), f"{path.name}:{branch} indexed at {head[:8]}")
    _status_up_to_date(path, branch, head)
    return data


def test_git_operations_keep_the_index_current(repo: Repo, daemon: subprocess.Popen[bytes], tmp_path: Path) -> None:
    repo.write("util.py", "def helper():\n    return 1\n")
    repo.commit("first")
    gitrag("install", "--no-systemd", "--repo", str(repo.path))

    # commit a new function: within seconds `gitrag ask` finds it
    repo.write("billing.py", "def compute_invoice_total(items):\n    return sum(i.price for i in items)\n")
    t0 = time.monotonic()
    head = repo.commit("billing")
    _settle(repo.path, "main", head)
    answer = gitrag_json("ask", "compute_invoice_total", "--repo", str(repo.path), "-k", "3", "--no-answer")
    assert time.monotonic() - t0 < 15
    assert answer["up_to_date"] and answer["results"][0]["symbol"] == "compute_invoice_total"
    scoped = gitrag_json("ask", "helper", "--repo", str(repo.path), "--path", "util", "--no-answer")
    assert {r["path"] for r in scoped["results"]} == {"util.py"}

    # check out another branch (never indexed): indexed for that branch
    repo.git("branch", "feature")
    repo.git("checkout", "-q", "feature")
    repo.write("feature.py", "def feature_flag():\n    return True\n")
    feature_head = repo.commit("feature")
    _settle(repo.path, "feature", feature_head)

    # merge feature into main
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "feature", "-m", "merge feature")
    _settle(repo.path, "main", repo.head())

    # a pull that fast-forwards
    upstream = Repo.__new__(Repo)
    upstream.path = tmp_path / "upstream"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(upstream.path)], check=True)
    upstream.write("remote.py", "def from_upstream():\n    return 2\n")
    upstream_head = upstream.commit("upstream work")
    repo.git("pull", "-q", "--ff-only", str(upstream.path), "main")
    assert repo.head() == upstream_head
    _settle(repo.path, "main", upstream_head)

    # a 20-commit rebase is coalesced: one sync moves the index, not twenty
    repo.git("checkout", "-q", "feature")
    for i in range(20):
        repo.write(f"topic_{i}.py", f"def topic_{i}():\n    return {i}\n")
        repo.commit(f"topic {i}")
    before = _settle(repo.path, "feature", repo.head())["repos"][0]["syncs"]
    repo.git("rebase", "-q", "main")
    after = _settle(repo.path, "feature", repo.head())["repos"][0]["syncs"]
    assert after - before == 1

    # amend
    repo.write("feature.py", "def feature_flag():\n    return False\n")
    repo.git("add", "feature.py")
    repo.git("commit", "-q", "--amend", "-m", "feature, amended")
    _settle(repo.path, "feature", repo.head())

    # a linked worktree with a commit there: indexed as its own branch and work tree
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", str(wt), "-b", "hotfix", "main")
    (wt / "hotfix.py").write_text("def urgent_patch():\n    return 'fixed'\n")
    subprocess.run(["git", "add", "-A"], cwd=wt, check=True)
    repo_env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e.invalid",
                "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@e.invalid"}
    subprocess.run(["git", "commit", "-q", "-m", "hotfix"], cwd=wt, check=True, env=repo_env)
    wt_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt, capture_output=True, text=True).stdout.strip()
    _settle(wt, "hotfix", wt_head)
    hit = gitrag_json("ask", "urgent_patch", "--repo", str(wt), "-k", "1", "--no-answer")
    assert hit["branch"] == "hotfix" and hit["results"][0]["symbol"] == "urgent_patch"
    _status_up_to_date(repo.path, "feature", repo.head())  # the main work tree is untouched


def test_commits_while_the_daemon_is_down_are_indexed_when_it_starts(repo: Repo, daemons: Any) -> None:
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    proc = daemons()
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    assert stop_daemon(proc) == 0
    repo.write("b.py", "def written_while_down():\n    return 2\n")
    head = repo.commit("while the daemon is down")  # the commit succeeds
    wait_for(lambda: spool.pending(), "the event in the spool")
    daemons()
    wait_for(lambda: indexed_at(repo.path, head), "the spooled commit to be indexed")
    assert spool.pending() == 0


def test_sigterm_exits_cleanly_and_spools_what_is_still_queued(repo: Repo, daemons: Any) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    registry.add(repo.path / ".git")
    gitrag("index", "--repo", str(repo.path))  # nothing for the start-up reconcile to do
    proc = daemons("--debounce", "60")
    reply = client.request("notify", repo=str(repo.path), hook="post-commit", args=[])
    assert reply["accepted"]
    assert client.request("notify", repo=str(repo.path), hook="post-commit", args=[], branch="feature/ünï")["accepted"]
    assert stop_daemon(proc) == 0
    assert not protocol.socket_path().exists()
    (event,) = spool.drain()  # one work tree queued, with the branch its hook reported
    assert Path(event["repo"]) == repo.path.resolve() and event["branch"] == "feature/ünï"


def test_sigterm_lets_the_running_sync_finish(repo: Repo, daemons: Any) -> None:
    for i in range(1000):  # a first index that takes a few seconds, even with the hash embedder
        repo.write(f"pkg/mod_{i}.py", "".join(f"def f_{i}_{j}(x):\n    return x + {j}\n\n" for j in range(6)))
    head = repo.commit("big")
    registry.add(repo.path / ".git")
    proc = daemons()  # the start-up reconcile begins the sync
    wait_for(lambda: client.request("status", repo=str(repo.path))["repos"][0]["queue"], "the sync to start",
             every_s=0.02)
    assert stop_daemon(proc) == 0
    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log").read_text()
    assert log.index("daemon stopping") < log.index("synced")  # SIGTERM came mid-sync, the sync finished
    from gitrag.index.state import State

    state = State(config.repo_data_dir(repo.path / ".git"))
    try:
        branch = state.branch("main")
        assert branch is not None and branch.indexed_commit == head and not state.journal_paths("main")
    finally:
        state.close()
    assert spool.pending() == 0


def test_one_daemon_wins_and_a_stale_socket_is_replaced() -> None:
    path = protocol.socket_path()
    protocol.private_dir(path.parent)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: a crashed daemon's socket
    cmd = [sys.executable, "-m", "gitrag", "daemon"]
    procs = [subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    try:
        loser = wait_for(lambda: next((p for p in procs if p.poll() is not None), None), "one daemon to give up")
        winner = next(p for p in procs if p is not loser)
        assert loser.returncode == 1 and b"already runs" in loser.stderr.read()
        assert wait_for(lambda: client.probe()["running"], "the winner to answer")
        assert client.probe()["pid"] == winner.pid
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        with pytest.raises(SocketInUse):
            clear_stale(path)  # a live socket is never taken over
    finally:
        for p in procs:
            stop_daemon(p)


def test_errors_cross_the_socket_as_data(repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    with pytest.raises(client.CommandError) as info:
        client.request("ask", repo=str(repo.path), question="anything")
    assert info.value.kind == "NotIndexed" and info.value.exit_code == 1
    proc = gitrag("ask", "anything", "--repo", str(repo.path), check=False)
    assert proc.returncode == 1 and "not indexed" in proc.stderr
    with pytest.raises(client.CommandError, match="unknown op"):
        client.request("bogus")
    with pytest.raises(client.CommandError, match="bad arguments"):
        client.request("ask", nonsense=1)
    assert client.request("ping")["pid"] == daemon.pid  # still serving


def test_ask_exclude_and_files_through_the_socket(repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    repo.write("billing.py", "def invoice_total(items):\n    return sum(i.price for i in items)\n")
    repo.write("docs/billing.md", "# Invoice total\n\nThe invoice total sums the item prices.\n")
    repo.commit("code and docs")
    gitrag("index", "--repo", str(repo.path))
    args = {"repo": str(repo.path), "question": "invoice total", "mode": "sparse"}
    plain = client.request("ask", **args)
    assert "docs/billing.md" in {r["path"] for r in plain["results"]} and "files" not in plain
    data = client.request("ask", **args, exclude=["docs/**"], files=True)
    assert [r["path"] for r in data["results"]] == ["billing.py"]
    assert [f["path"] for f in data["files"]] == ["billing.py"] and data["files"][0]["chunks"]
    # the CLI through the daemon rebuilds the files from the reply
    cli = gitrag_json("ask", "invoice total", "--repo", str(repo.path), "--mode", "sparse", "--files",
                      "--exclude", "*.md", "--no-answer")
    assert cli["files"] == data["files"]
    # types are checked by the socket's argument table, an empty glob by the exclude parser
    for bad, kind in (("docs/**", "BadArguments"), ([1], "BadArguments"), ([""], "ConfigError")):
        with pytest.raises(client.CommandError) as info:
            client.request("ask", **args, exclude=bad)
        assert info.value.kind == kind and "exclude" in str(info.value)
    with pytest.raises(client.CommandError, match="'files' must be true or false"):
        client.request("ask", **args, files="yes")


class _Handler:
    async def cmd_echo(self, **args: Any) -> Any:
        return args

    async def cmd_fail(self) -> None:
        raise NotIndexed("branch 'x' is not indexed yet")

    async def cmd_crash(self) -> None:
        raise RuntimeError("boom")


def test_dispatch_codec() -> None:
    def run(line: bytes) -> dict:
        return asyncio.run(dispatch(_Handler(), line))

    assert run(protocol.encode(protocol.request("echo", {"a": 1}))) == protocol.success({"a": 1})
    fail = run(protocol.encode(protocol.request("fail", {})))
    assert (fail["ok"], fail["kind"], fail["exit_code"]) == (False, "NotIndexed", 1)
    crash = run(protocol.encode(protocol.request("crash", {})))
    assert crash["kind"] == "InternalError" and "boom" in crash["traceback"]
    assert run(b'{"v": 2, "op": "echo"}\n')["kind"] == "ProtocolError"
    assert run(b"not json\n")["kind"] == "ProtocolError"
    assert run(protocol.encode(protocol.request("nope", {})))["kind"] == "UnknownOp"


def test_socket_server_limits_and_peer(tmp_path: Path) -> None:
    path = tmp_path / "run" / "s.sock"

    async def main() -> None:
        server = await serve(_Handler(), path)
        try:
            echo = partial(client.request, "echo", timeout=5.0, socket_path=path, x=[1, 2], path="a/")
            assert await asyncio.to_thread(echo) == {"x": [1, 2], "path": "a/"}

            def oversized() -> bytes:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(path))
                    s.sendall(b"x" * (protocol.MAX_MESSAGE + 10) + b"\n")
                    return s.recv(4096)

            assert b"exceeds" in await asyncio.to_thread(oversized)
        finally:
            server.close()

    asyncio.run(main())
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert peer_uid(a) == os.getuid()


def test_socket_path_stays_under_the_unix_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITRAG_HOME", str(tmp_path / ("deep" * 30)))
    path = protocol.socket_path()
    assert len(os.fsencode(path)) <= protocol.MAX_SOCKET_PATH
    assert path.parent == Path(f"/tmp/gitrag-{os.getuid()}")


def test_gc_drops_collections_of_unused_branches_not_checked_out(repo: Repo) -> None:
    from gitrag.daemon import gc
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("first")
    with open_workspace(repo.path) as ws:
        Indexer(ws).sync()
        repo.git("checkout", "-q", "-b", "old")
        Indexer(replace(ws, repo=GitRepo(repo.path))).sync()
        repo.git("checkout", "-q", "main")
        ws.state.db.execute("UPDATE branches SET last_used=0")  # both unused for ages
        old, main = ws.state.branch("old"), ws.state.branch("main")
        assert old is not None and main is not None and ws.store.ids(old.collection, branch=old.view)
        assert gc.drop_expired(ws, checked_out={"main"}) == ["old"]  # main is checked out: kept
        assert not ws.state.branch("old").materialized and ws.state.point_count("old")
        assert ws.store.ids(main.collection, branch=main.view) == {r.point_id for r in ws.state.points("main")}
        assert gc.worktrees(repo.path / ".git") == [str(repo.path.resolve())]
        assert not gc.stale(GitRepo(repo.path), ws.state)


def _branches(path: Path) -> dict[str, dict[str, Any]]:
    """The daemon's status of every indexed branch of the repository at ``path``, by name."""
    return {b["name"]: b for b in client.request("status", timeout=10.0, repo=str(path))["repos"][0]["branches"]}


def _at_tips(path: Path, tips: dict[str, str]) -> dict[str, dict[str, Any]] | None:
    """The branches once every one in ``tips`` is indexed at its tip (else None)."""
    got = _branches(path)
    done = all(name in got and got[name]["indexed_commit"] == tip and got[name]["up_to_date"]
               for name, tip in tips.items())
    return got if done else None


@pytest.mark.parametrize(("left", "to", "new"), [("main", "feature/x", True), ("feature/ünï", "main", False)])
def test_a_branch_left_right_after_a_commit_is_synced_to_its_tip(repo: Repo, daemons: Any, left: str, to: str,
                                                                 new: bool) -> None:
    repo.write("util.py", "def helper():\n    return 1\n")
    repo.commit("first")
    proc = daemons()
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    if left != "main":
        repo.git("checkout", "-q", "-b", left)
        _settle(repo.path, left, repo.head())

    # the commit's hook fires, then HEAD moves on before the debounce ends
    repo.write("ledger.py", "def reconcile_ledger_entries(rows):\n    return sorted(rows)\n")
    tip = repo.commit("ledger")
    repo.git("checkout", "-q", *(["-b"] if new else []), to)
    got = wait_for(lambda: _at_tips(repo.path, {left: tip, to: repo.head()}),
                   f"{left} (left) and {to} (checked out) indexed at their tips")
    assert got[to]["current"] and not got[left]["current"]
    assert client.request("status", repo=str(repo.path))["repos"][0]["last_error"] is None
    text = gitrag("status", "--repo", str(repo.path)).stdout
    assert ", head " not in text and text.count("up to date") == len(got)  # no branch shown behind

    # the left branch's index (not a sync made when it is checked out again) finds the commit:
    # with the daemon stopped, checking it out only spools an event, and ask runs in-process
    assert stop_daemon(proc) == 0
    repo.git("checkout", "-q", left)
    answer = gitrag_json("ask", "reconcile_ledger_entries", "--repo", str(repo.path), "-k", "3", "--no-answer")
    assert answer["branch"] == left and answer["commit"] == tip and answer["up_to_date"]
    assert answer["results"][0]["symbol"] == "reconcile_ledger_entries"


def _queue(path: Path) -> int:
    return int(client.request("status", timeout=10.0, repo=str(path))["repos"][0]["queue"])


def test_a_reported_branch_deleted_before_the_sync_is_dropped_quietly(repo: Repo, daemons: Any) -> None:
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    proc = daemons()
    gitrag("install", "--no-systemd", "--repo", str(repo.path))
    # a branch that never existed, straight over the socket (marked before the reply: the
    # queue is not empty until its syncs ran); a malformed one is refused
    reply = client.request("notify", repo=str(repo.path), hook="post-commit", args=[], branch="no/such/ünï")
    assert reply["accepted"] and reply["queue"] >= 1
    wait_for(lambda: _queue(repo.path) == 0, "the notified syncs to run")
    for bad in (7, ""):
        with pytest.raises(client.CommandError) as info:
            client.request("notify", repo=str(repo.path), hook="post-commit", args=[], branch=bad)
        assert info.value.kind == "BadArguments"
    # the real hooks: a commit on a branch deleted at once. With the daemon down their events
    # wait in the spool, so the restarted daemon surely sees the branch reported, and gone.
    assert stop_daemon(proc) == 0
    repo.git("checkout", "-q", "-b", "doomed/ünï")
    repo.write("b.py", "def short_lived():\n    return 2\n")
    repo.commit("on a branch about to go")
    repo.git("checkout", "-q", "main")
    repo.git("branch", "-q", "-D", "doomed/ünï")
    # two checkouts, and reference-transaction's branch made and commit (post-commit is quiet then)
    events = wait_for(lambda: spool.pending() == 4 and spool.drain(), "the four hook events in the spool")
    assert [e.get("branch") for e in events if e["hook"] == "reference-transaction"] == ["doomed/ünï"] * 2
    for event in events:
        spool.append(event)
    proc = daemons()
    wait_for(lambda: spool.pending() == 0, "the spool drained")
    wait_for(lambda: _queue(repo.path) == 0, "the spooled events' syncs to run")
    # the daemon stays healthy: no error recorded, and the next commit on main is indexed
    assert client.request("status", repo=str(repo.path))["repos"][0]["last_error"] is None
    assert "doomed/ünï" not in _branches(repo.path)
    repo.write("c.py", "def after_the_delete():\n    return 3\n")
    head = repo.commit("main moves on")
    wait_for(lambda: _at_tips(repo.path, {"main": head}), "main indexed at its tip")
    assert client.request("ping")["pid"] == proc.pid
    log = Path(os.environ["GITRAG_HOME"] + "-daemon.log").read_text()
    assert "sync failed" not in log and "sync crashed" not in log and "Traceback" not in log
    assert log.count("reported branch gone") >= 2  # both reported branches were looked up, and found gone


def test_a_job_cancelled_by_the_daemon_stopping_is_one_line_not_a_traceback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A scheduled job still running when the daemon stops is cancelled with the loop: that
    is normal, so daemon.log gets no "raised an exception" traceback for it."""
    import asyncio
    import logging

    from gitrag.daemon.jobs import Jobs
    from gitrag.daemon.service import Service

    async def main() -> None:
        service = Service(str(tmp_path / "daemon.sock"))
        running = asyncio.Event()

        async def slow_round(_service: object) -> None:  # a warm-up round still under way at the stop
            running.set()
            await asyncio.sleep(3600)

        service.warmer.run = slow_round  # type: ignore[method-assign]  # a round that outlives the stop
        jobs = Jobs(service, reconcile_s=3600, gc_s=3600)
        jobs.start()
        await asyncio.wait_for(running.wait(), 30)
        jobs.shutdown()  # then asyncio.run cancels what still runs, as the daemon's _serve returning does

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.exc_info or "raised an exception" in r.getMessage()], caplog.text
