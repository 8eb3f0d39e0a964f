"""Several agents and commands at once, and what the daemon tells them (issue 13, items 4, 5,
12): two ``gitrag mcp`` servers and a CLI ``ask`` with no daemon running share one store
owner; a CLI whose GITRAG_EMBEDDER differs from the daemon's is refused; ``ask`` says that
the daemon is catching up; ``uninstall`` returns once the daemon has exited; a repository
with no commit is told to commit first. Real processes, the MCP SDK client over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gitrag.daemon import client
from tests.daemonutil import stop_daemon, wait_for
from tests.gitutil import Repo
from tests.reliability import commit_a, commit_b, indexed_commit, lost_wrong, record, run, start_daemon, sync

GROUP = "agents"
SEARCHES = 8  # per MCP server


async def _agent(path: Path, errlog: Path, queries: list[str]) -> list[Any]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "gitrag", "mcp", "--repo", str(path)],
                                   env=dict(os.environ))
    out = []
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for q in queries:
                out.append(await session.call_tool("search_code", {"query": q, "k": 3}))
    return out


def test_two_mcp_servers_and_a_cli_ask_at_once_share_one_store_owner(repo: Repo, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    commit_a(repo)
    sync(repo.path)  # in this process, closed again: no daemon runs
    assert not client.probe()["running"]
    results: dict[str, Any] = {}

    async def main() -> None:
        async def agent(name: str) -> None:
            queries = [f"compute step {i} of alpha" for i in range(SEARCHES)]
            results[name] = await _agent(repo.path, tmp_path / f"{name}.err", queries)

        async def cli() -> None:
            results["cli"] = await anyio.to_thread.run_sync(
                lambda: run("ask", "compute step 2 of beta", "--repo", str(repo.path), "--no-answer", "--json"))

        with anyio.fail_after(300):
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent, "mcp-1")
                tg.start_soon(agent, "mcp-2")
                tg.start_soon(cli)

    anyio.run(main)
    failed = [(name, r.content[0].text) for name in ("mcp-1", "mcp-2") for r in results[name] if r.is_error]
    assert not failed, failed
    assert all(r.structured_content["results"] for name in ("mcp-1", "mcp-2") for r in results[name])
    cli_ask = results["cli"]
    assert cli_ask.returncode == 0 and json.loads(cli_ask.stdout)["results"], cli_ask.stderr
    daemon = client.probe()
    assert daemon["running"]  # the one store owner, started on demand by the MCP servers
    commit_b(repo)  # and a sync still works, through that daemon
    proc = run("index", "--repo", str(repo.path))
    assert proc.returncode == 0 and "indexed by the running daemon" in proc.stderr, proc.stderr
    assert indexed_commit(repo.path) == repo.head()
    assert client.request("stop", timeout=10)["pid"] == daemon["pid"]
    wait_for(lambda: not client.probe()["running"], "the daemon to stop")
    from gitrag.daemon import launch

    wait_for(lambda: not launch.lock_held(), "the daemon to exit")
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    record(f"two `gitrag mcp` servers ({SEARCHES} searches each) and a CLI `ask` at once, no daemon running",
           f"all {2 * SEARCHES + 1} searches answered: the first MCP search starts the daemon, the one store "
           "owner; then a sync through it", lost, wrong, GROUP)


def test_a_cli_embedder_that_differs_from_the_daemons_is_refused(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    daemon = start_daemon()  # GITRAG_EMBEDDER=hash, as the whole test session
    try:
        before = indexed_commit(repo.path)
        for args in (["index", "--rebuild"], ["ask", "alpha", "--no-answer"]):
            proc = run(*args, "--repo", str(repo.path), env={"GITRAG_EMBEDDER": "local"})
            assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1 and "GITRAG_EMBEDDER='local' here, 'hash' in the daemon" in lines[0], lines
        assert indexed_commit(repo.path) == before
        same = run("ask", "alpha", "--repo", str(repo.path), "--no-answer")  # the same settings: answered
        assert same.returncode == 0, same.stderr
    finally:
        assert stop_daemon(daemon) == 0
    record("GITRAG_EMBEDDER=local on a CLI while the daemon runs with hash",
           "refused in one line naming both values (index --rebuild and ask); nothing rebuilt", group=GROUP)


def _install(repo: Repo) -> None:
    proc = run("install", "--no-systemd", "--no-index", "--repo", str(repo.path))
    assert proc.returncode == 0 and "already runs" in proc.stderr, proc.stderr


def _queued(repo: Repo) -> bool:
    status = client.request("status", timeout=30, repo=str(repo.path))
    return status["repos"][0]["queue"] >= 1


SLOW = {"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 1.0]]}


def test_ask_right_after_a_checkout_says_the_daemon_is_catching_up(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    daemon = start_daemon(prelude=SLOW, env={"GITRAG_BATCH_SIZE": "2"})
    try:
        _install(repo)
        repo.git("checkout", "-q", "-b", "feature")
        commit_b(repo)  # the hooks tell the daemon; its sync embeds for several seconds
        wait_for(lambda: _queued(repo), "the daemon to take the commit")
        proc = run("ask", "compute alpha", "--repo", str(repo.path), "--no-answer")
        said = proc.stdout + proc.stderr
        assert "the daemon is indexing it now" in said or "the daemon has a sync of it queued" in said, said
        assert "run `gitrag index`" not in said, said
        wait_for(lambda: indexed_commit(repo.path) == repo.head(), "the daemon to finish", deadline_s=120)
    finally:
        assert stop_daemon(daemon) == 0
    record("`ask` right after `git checkout -b` + commit, while the daemon indexes the branch",
           "says the daemon is indexing it now (stage: done of total), not `run gitrag index`", group="messages")


def test_uninstall_returns_once_the_daemon_has_exited(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    daemon = start_daemon(prelude=SLOW, env={"GITRAG_BATCH_SIZE": "2"})
    try:
        _install(repo)
        commit_b(repo)
        wait_for(lambda: _queued(repo), "the daemon to take the commit")
        proc = run("uninstall", "--repo", str(repo.path))
        exited = daemon.poll()  # at the moment uninstall returned
        assert proc.returncode == 0 and f"stopped the gitrag daemon (pid {daemon.pid})" in proc.stdout, proc.stderr
        assert exited is not None, "uninstall said the daemon stopped while it was still running"
    finally:
        stop_daemon(daemon)
    record("`gitrag uninstall` of the last repository while the daemon syncs",
           "says \"stopped the gitrag daemon\" only once it has exited (its lock released)", group="messages")


def test_status_and_doctor_in_a_repository_with_no_commit_say_commit_first(repo: Repo) -> None:
    status = run("status", "--repo", str(repo.path))
    assert status.returncode == 0, status.stderr
    assert "commit first" in status.stdout and "run `gitrag index`" not in status.stdout, status.stdout
    doctor = run("doctor", "--repo", str(repo.path))
    lag = [line for line in doctor.stdout.splitlines() if " lag " in f" {line} "]
    assert lag and "commit first" in lag[0] and "gitrag index --repo" not in lag[0], doctor.stdout
    record("`status` and `doctor` in a repository with no commit", "say \"no commit yet: commit first\", "
           "not \"run `gitrag index`\" (which would fail)", group="messages")
