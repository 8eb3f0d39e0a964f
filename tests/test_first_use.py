"""What a new user met in a first session (issue 24's trial), each fixed and held here: real
git repositories, a real daemon process on its real unix socket, the CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess

from tests.daemonutil import gitrag
from tests.gitutil import Repo


def _integrity(repo: Repo, *extra: str) -> dict:
    proc = gitrag("doctor", "--json", "--repo", str(repo.path), *extra, check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "integrity")


def test_doctor_deep_while_the_daemon_holds_the_store_is_run_by_the_daemon(
        repo: Repo, daemon: subprocess.Popen[bytes]) -> None:
    """The daemon holds the embedded store open, so `doctor --deep` could not open it and
    checked nothing (a new user got the engine's lock error). The daemon now runs the check
    over its socket: every point and cache row verified, in one line."""
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.write("b.py", "def beta():\n    return 2\n")
    repo.commit("first")
    gitrag("index", "--repo", str(repo.path))  # through the daemon, which keeps the store open
    deep = _integrity(repo, "--deep")
    assert deep["status"] == "ok", deep
    assert deep["detail"].startswith("every ") and "verified by the daemon" in deep["detail"], deep
    sample = _integrity(repo)
    assert sample["status"] == "ok" and "verified by the daemon" in sample["detail"], sample


def test_the_lines_install_prints_for_a_project_hooks_folder_can_be_committed(
        repo: Repo, daemon: subprocess.Popen[bytes], tmp_path) -> None:
    """With core.hooksPath in the work tree (a committed .githooks/, husky), install prints
    the line to add to each project hook. It named this machine's path of .git, so it could
    not be committed. The printed line now names no path: added to the committed hook, it
    makes this clone's commits reach the daemon, and in a clone at another path without
    gitrag installed a commit still succeeds with no error."""
    from tests.daemonutil import indexed_at, wait_for

    hooks = repo.path / ".githooks"
    hooks.mkdir()
    repo.git("config", "core.hooksPath", ".githooks")
    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    told = gitrag("install", "--no-systemd", "--repo", str(repo.path))
    lines = [row.strip() for row in told.stdout.splitlines() if row.strip().startswith(".githooks/")]
    assert len(lines) == 5 and not any(str(repo.path) in row or "/tmp" in row for row in lines), told.stdout
    assert "commit them" in told.stderr
    for row in lines:
        name, line = row.split(":  ", 1)
        (repo.path / name).write_text(f"#!/bin/sh\n{line}\n")
        (repo.path / name).chmod(0o755)
    doctor = json.loads(gitrag("doctor", "--json", "--repo", str(repo.path), check=False).stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "hooks")["status"] == "ok", doctor
    repo.write("b.py", "def beta():\n    return 2\n")
    head = repo.commit("hooks that call gitrag's, committed with the project")
    wait_for(lambda: indexed_at(repo.path, head), "the commit to reach the daemon through the project's hook")
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    subprocess.run(["git", "config", "core.hooksPath", ".githooks"], cwd=clone, check=True)
    (clone / "c.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "c.py"], cwd=clone, check=True)
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c"], cwd=clone,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_the_catch_up_wait_is_a_deadline_even_when_the_daemon_is_loaded(repo: Repo) -> None:
    """A new user's ask waited 11 s with GITRAG_ASK_WAIT=3: the daemon polled "is the index at
    HEAD?" through its thread pool, and under load that one look took longer than the whole
    wait. Here the daemon's real worker (its sync thread busy with another job, every thread of
    the pool busy) catches up a real repository one commit behind: the wait ends at its
    deadline, not when the look comes back, and the sync still runs once the load is gone."""
    import asyncio
    import threading
    import time

    from gitrag.daemon import catchup
    from gitrag.daemon.worker import RepoWorker
    from gitrag.index.workspace import open_workspace
    from tests.gitutil import index

    repo.write("a.py", "def alpha():\n    return 1\n")
    repo.commit("first")
    index(repo.path)
    repo.write("b.py", "def beta():\n    return 2\n")
    head = repo.commit("second")
    root = str(repo.path)

    async def body() -> tuple[bool, float, str | None]:
        worker = RepoWorker(str(repo.path / ".git"), open_workspace)
        loop = asyncio.get_running_loop()
        load = threading.Event()
        busy = [asyncio.ensure_future(worker.serial(load.wait, 8.0))]  # another sync on the worker's thread
        busy += [loop.run_in_executor(None, load.wait, 8.0) for _ in range(64)]  # every pool thread taken

        async def at_head() -> bool:
            return await worker.read(lambda: catchup.lag(worker.workspace(root))) is None

        t0 = time.monotonic()
        got = await catchup.catch_up(worker, root, 1.0, at_head)
        took = time.monotonic() - t0
        load.set()
        await asyncio.gather(*busy)
        deadline = time.monotonic() + 60
        while worker.catching_up(root) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        lag = await worker.read(lambda: catchup.lag(worker.workspace(root)))
        await worker.serial(worker.close)
        return got, took, lag

    got, took, lag = asyncio.run(body())
    assert got is False and took < 1.8, took  # GITRAG_ASK_WAIT=1 holds (it took 8 s before)
    assert lag is None  # the queued sync brought the index to HEAD once the load was gone
    with open_workspace(repo.path) as ws:
        assert ws.state.branch("main").indexed_commit == head


def test_mcp_answers_requests_received_before_stdin_closed(repo: Repo) -> None:
    """A client that sends its requests and closes stdin (``printf ... | gitrag mcp``) got
    the initialize reply and nothing else: the SDK cancelled the searches in flight at EOF.
    Every request received now gets its reply before the server exits."""
    import sys

    from tests.gitutil import index

    repo.write("app/retry.py", "def backoff_delay(attempt):\n    \"\"\"Seconds before a retry.\"\"\"\n"
                               "    return 2 ** attempt\n")
    repo.commit("retry")
    index(repo.path)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search_code", "arguments": {"query": "retry backoff delay", "k": 1}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "index_status", "arguments": {}}},
    ]
    proc = subprocess.run([sys.executable, "-m", "gitrag", "mcp", "--repo", str(repo.path)],
                          input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True, text=True,
                          timeout=300)
    replies = {r.get("id"): r for r in map(json.loads, proc.stdout.splitlines()) if "id" in r}
    assert set(replies) == {1, 2, 3}, (proc.stdout, proc.stderr[-2000:])
    found = replies[2]["result"]["structuredContent"]
    assert found["results"][0]["path"] == "app/retry.py", found
    assert replies[3]["result"]["structuredContent"]["up_to_date"] is True


def test_a_one_line_data_file_is_skipped_as_minified_data(repo: Repo) -> None:
    """A new user's 1 MB one-line JSON became 4,863 chunks (slices of one line, each matching
    any question about its keys). A large one-line JSON or SVG is now skipped with its reason,
    like minified JS; a pretty-printed JSON of the same data and a small one-line config stay."""
    records = [{"id": i, "name": f"station {i}", "lat": 48.0 + i / 1000, "lon": 2.0 + i / 1000} for i in range(3000)]
    repo.write("data/stations.json", json.dumps(records))  # ~200 KB, one line
    repo.write("data/stations-pretty.json", json.dumps(records[:300], indent=2))  # ~25 KB, short lines
    repo.write("config/settings.json", json.dumps({"name": "demo", "debug": False, "port": 8080}))
    repo.write("icons/logo.svg", "<svg xmlns='http://www.w3.org/2000/svg'>" + "<path d='M0 0L1 1'/>" * 800 + "</svg>")
    repo.write("app.py", "def main():\n    return 0\n")
    repo.commit("data")
    data = json.loads(gitrag("index", "--json", "--repo", str(repo.path)).stdout)
    skipped = {s["path"]: s["reason"] for s in data["skipped"]}
    assert skipped["data/stations.json"].startswith("minified (data, average line "), skipped
    assert skipped["icons/logo.svg"].startswith("minified (data, "), skipped
    repo.write("web/app.js", "var a=1;" * 200)  # minified code: the same kind of reason, one term
    repo.commit("js")
    gitrag("index", "--repo", str(repo.path))
    kinds = json.loads(gitrag("status", "--json", "--repo", str(repo.path)).stdout)["repos"][0]["branches"][0]["skipped"]
    assert kinds == {"minified": 3}, kinds
    assert "data/stations-pretty.json" not in skipped and "config/settings.json" not in skipped, skipped
    assert data["files_indexed"] == 3 and data["chunks_total"] < 400, data
