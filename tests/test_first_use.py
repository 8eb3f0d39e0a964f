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
