"""Helpers for the hook/daemon/install tests: run the CLI, run a real daemon, poll with a deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gitrag.daemon import client

T = TypeVar("T")
DEADLINE_S = 30.0


def gitrag(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m gitrag ARGS`` in a subprocess with the test's environment."""
    proc = subprocess.run([sys.executable, "-m", "gitrag", *args], cwd=cwd, capture_output=True, text=True,
                          check=False, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"gitrag {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def gitrag_json(*args: str, cwd: Path | None = None) -> Any:
    return json.loads(gitrag(*args, "--json", cwd=cwd).stdout)


def wait_for(probe: Callable[[], T | None], what: str, deadline_s: float = DEADLINE_S, every_s: float = 0.05) -> T:
    """Poll ``probe`` until it returns something truthy; AssertionError after the deadline."""
    deadline = time.monotonic() + deadline_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)
    raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what}; last: {last!r}")


def start_daemon(*extra: str) -> subprocess.Popen[bytes]:
    """A real ``python -m gitrag daemon`` process, answering on the socket when this returns."""
    log = open(os.environ["GITRAG_HOME"] + "-daemon.log", "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "daemon", "--debounce", "0.2", *extra],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    wait_for(lambda: client.probe(timeout=0.5)["running"] or proc.poll() is not None, "the daemon to answer")
    if proc.poll() is not None:
        raise AssertionError(f"the daemon exited with {proc.returncode}; see {log.name}")
    return proc


def stop_daemon(proc: subprocess.Popen[bytes], timeout_s: float = DEADLINE_S) -> int:
    """SIGTERM and wait; returns the exit code (kills it if it does not exit in time)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def indexed_at(worktree: Path, head: str) -> dict[str, Any] | None:
    """The daemon's status of ``worktree`` once its current branch is indexed at ``head``."""
    data = client.request("status", timeout=10.0, repo=str(worktree))
    repo = data["repos"][0]
    for b in repo["branches"]:
        if b["current"] and b["indexed_commit"] == head and b["up_to_date"]:
            return data
    return None
