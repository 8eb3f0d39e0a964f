"""A GITRAG_HOME gitrag cannot write (a read-only mount, a folder of another user): one clear
line and exit code 1 from every command; ``install`` checks before it touches a hook;
``uninstall`` removes what it can and says what it could not; a SQLite file that does not open
for that reason is never called corrupt ("move it away" is for a damaged file only).

Read-only is real: a read-only bind mount of the folder (root is not stopped by file modes),
and a real second user against a root-owned 0755 home."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gitrag.daemon import registry
from gitrag.git import hooks as install
from tests.daemonutil import gitrag
from tests.gitutil import Repo
from tests.reliability import record
from tests.users import created_user, git_repo

GROUP = "store and state"


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """``read_only(folder)`` bind-mounts ``folder`` onto itself read-only (unmounted after the
    test). Skips where mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    if shutil.which("mount") is None or os.getuid() != 0:
        pytest.skip("needs root and mount(8) for a read-only bind mount")
    mounted: list[Path] = []

    def make(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for cmd in (["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,ro,bind", str(folder)]):
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                if mounted[-1:] == [folder] or cmd[1] == "-o":
                    subprocess.run(["umount", str(folder)], capture_output=True, check=False)
                pytest.skip(f"cannot bind-mount read-only here: {proc.stderr.strip()}")
        mounted.append(folder)
        probe = folder / ".probe"
        with pytest.raises(OSError):
            probe.write_text("x")  # really read-only, for root too

    yield make
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], capture_output=True, check=False)


def _home() -> Path:
    return Path(os.environ["GITRAG_HOME"])


def _not_writable(home: Path, why: str, where: Path) -> str:
    return (f"gitrag: error: GITRAG_HOME {home} is not writable: {why} ({where}); make it writable or set "
            f"GITRAG_HOME to a folder you can write\n")


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _with_own_hook(repo: Repo) -> Path:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    hooks = repo.path / ".git" / "hooks"
    (hooks / "post-commit").write_text("#!/bin/sh\necho mine\n")
    (hooks / "post-commit").chmod(0o755)
    return hooks


def test_install_on_a_read_only_home_says_so_before_touching_a_hook(
        repo: Repo, read_only: Callable[[Path], None]) -> None:
    hooks = _with_own_hook(repo)
    before = _snapshot(hooks)
    read_only(_home())
    proc = gitrag("install", "--no-systemd", "--repo", str(repo.path), check=False)
    assert (proc.returncode, proc.stderr, proc.stdout) == (
        1, _not_writable(_home(), "Read-only file system", _home() / "data"), "")
    assert _snapshot(hooks) == before  # nothing half-done: the user's hook in place, no gitrag hook
    record("`gitrag install` with a read-only GITRAG_HOME", "one line `GITRAG_HOME … is not writable: Read-only "
           "file system`, exit 1, no hook written (was: 4 hooks written, then a traceback, exit 3)", group=GROUP)


def test_uninstall_on_a_read_only_home_removes_the_hooks_and_says_what_it_could_not(
        repo: Repo, read_only: Callable[[Path], None]) -> None:
    hooks = _with_own_hook(repo)
    before = {k: v[:2] for k, v in _snapshot(hooks).items()}
    gitrag("install", "--no-systemd", "--no-index", "--repo", str(repo.path))
    gitrag("daemon", "--stop")
    assert all(install.is_ours(hooks / n) for n in install.HOOKS)
    read_only(_home())
    proc = gitrag("uninstall", "--repo", str(repo.path), check=False)
    common = repo.path / ".git"
    state = _home() / "state"
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == _not_writable(_home(), "Read-only file system", state / "repos.json.lock").rstrip("\n") + (
        f"; {common} is still registered with the daemon: run `gitrag uninstall` again once it is writable\n")
    assert f"removed {hooks / 'post-commit'}" in proc.stdout.splitlines()
    assert "restored your hook post-commit from post-commit.legacy" in proc.stdout.splitlines()
    assert {k: v[:2] for k, v in _snapshot(hooks).items()} == before  # the hooks part is undone
    assert registry.is_registered(common)
    record("`gitrag uninstall` with a read-only GITRAG_HOME", "hooks removed and listed; one line saying the "
           "repository is still registered, exit 1 (was: silent, then a traceback, exit 3)", group=GROUP)


@pytest.mark.parametrize("command", ["ask", "status", "doctor", "gc"])
def test_commands_on_a_read_only_home_blame_the_file_system_not_the_cache(
        repo: Repo, read_only: Callable[[Path], None], command: str) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    gitrag("index", "--repo", str(repo.path))
    read_only(_home())
    args = ["ask", "a"] if command == "ask" else [command]
    proc = gitrag(*args, "--repo", str(repo.path), check=False)
    cache = _home() / "data" / "cache.db"
    line = (f"cannot open {cache} (unable to open database file): {cache.parent} is on a read-only file system, "
            f"and gitrag writes there; remount it read-write, fix the permissions, or set GITRAG_HOME to a folder "
            f"you can write (the file itself is fine: keep it)")
    assert proc.returncode == 1
    if command == "doctor":  # every check still runs; the one that needs the state says why
        lag = [row for row in proc.stdout.splitlines() if row.startswith("FAIL lag")]
        assert lag == [f"FAIL lag          {line}"], proc.stdout
        assert proc.stderr == ""
    else:
        assert proc.stderr == f"gitrag: error: {line}\n"
    assert "move it away" not in proc.stdout + proc.stderr
    record(f"`gitrag {command}` with a read-only GITRAG_HOME", "one line: the folder is on a read-only file "
           "system, keep the cache (was: `move it away (vectors are embedded again)`)", group=GROUP)


def test_a_damaged_cache_is_moved_aside_and_started_again(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    gitrag("index", "--repo", str(repo.path))
    cache = _home() / "data" / "cache.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    cache.write_bytes(b"this is not a SQLite file" * 200)
    proc = gitrag("status", "--repo", str(repo.path), check=False)
    # everything in it is derived: moved aside (kept for a look), an empty cache in its place
    assert proc.returncode == 0, proc.stderr
    assert "vector cache damaged: moved aside" in proc.stderr
    assert list(cache.parent.glob("cache.db.damaged-*")) == []  # derived data: not kept
    assert cache.read_bytes()[:16] == b"SQLite format 3\0"


def test_install_as_a_user_who_cannot_write_the_home(tmp_path: Path) -> None:
    with created_user("gtro") as user:
        home = Path(f"/tmp/gitrag-ro-home-{user.uid}")  # root's, 0755: others may enter, not write
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(mode=0o755)
        os.chmod(home, 0o755)
        try:
            path = git_repo(user)
            hooks = path / ".git" / "hooks"
            before = _snapshot(hooks)
            proc = user.gitrag("install", "--no-systemd", "--repo", str(path), env=user.env(GITRAG_HOME=str(home)))
            assert (proc.returncode, proc.stderr) == (1, _not_writable(home, "Permission denied", home / "data"))
            assert _snapshot(hooks) == before
            status = user.gitrag("status", "--repo", str(path), env=user.env(GITRAG_HOME=str(home)))
            assert (status.returncode, status.stderr) == (1, _not_writable(home, "Permission denied", home / "data"))
        finally:
            shutil.rmtree(home, ignore_errors=True)
    record("`gitrag install` / `status` by a user who cannot write GITRAG_HOME (another user's 0755 folder)",
           "one line `GITRAG_HOME … is not writable: Permission denied`, exit 1, no hook written", group=GROUP)


@pytest.mark.parametrize("command", [["ask", "a"], ["related", "a.py:1"]])
def test_asking_a_repository_never_indexed_on_a_read_only_home_says_what_index_says(
        repo: Repo, read_only: Callable[[Path], None], command: list[str]) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a")
    read_only(_home())
    index = gitrag("index", "--repo", str(repo.path), check=False)
    proc = gitrag(*command, "--repo", str(repo.path), check=False)
    line = _not_writable(_home(), "Read-only file system", _home() / "data")
    assert (index.returncode, index.stderr) == (1, line)
    assert (proc.returncode, proc.stderr, proc.stdout) == (1, line, ""), proc.stderr  # was: "not indexed: run ..."
    record(f"`gitrag {command[0]}` in a repository never indexed, with a read-only GITRAG_HOME", "the one line "
           "`index` gives (`GITRAG_HOME … is not writable`), exit 1 (was: `not indexed: run gitrag index`, which "
           "then fails)", group=GROUP)


def test_log_on_a_read_only_home_blames_the_file_system(repo: Repo, read_only: Callable[[Path], None]) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("add the a module")
    gitrag("index", "--repo", str(repo.path))
    assert "add the a module" in gitrag("log", "a module", "--repo", str(repo.path)).stdout
    read_only(_home())
    history = next((_home() / "data").glob("*/history.db"))
    line = (f"cannot open {history} (unable to open database file): {history.parent} is on a read-only file system, "
            f"and gitrag writes there; remount it read-write, fix the permissions, or set GITRAG_HOME to a folder "
            f"you can write (the file itself is fine: keep it)")
    for args in (["log", "a module"], ["log", "a module", "--json"]):
        proc = gitrag(*args, "--repo", str(repo.path), check=False)
        assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"gitrag: error: {line}\n"), proc.stderr
    record("`gitrag log` with a read-only GITRAG_HOME", "one line: the folder is on a read-only file system, keep "
           "the file (was: `nothing was deleted; check that its folder is mounted`)", group=GROUP)
