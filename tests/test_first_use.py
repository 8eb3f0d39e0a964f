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
