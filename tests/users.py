"""Real second users for the tests about users (tests run as root): created with
``useradd``, removed with ``userdel`` after; commands run as them with their uid and gid."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class User:
    name: str
    uid: int
    gid: int
    home: Path  # a private folder of this user under /tmp (pytest's tmp is root's 0700)
    python: str = sys.executable  # an interpreter this user may run (see _find_python)

    def env(self, **extra: str) -> dict[str, str]:
        """A login-like environment: no GITRAG_HOME, no XDG_* (so /tmp/gitrag-<uid> is used)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "USER": self.name,
               "LOGNAME": self.name, "PYTHONPATH": PYTHONPATH, "GITRAG_EMBEDDER": "hash", "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}
        env.update(extra)
        return env

    def run(self, *cmd: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), user=self.uid, group=self.gid, extra_groups=[], env=env or self.env(),
                              cwd=cwd or self.home, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)

    def gitrag(self, *args: str, env: dict[str, str] | None = None,
               timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-m", "gitrag", *args, env=env, timeout=timeout)

    def popen(self, *cmd: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(list(cmd), user=self.uid, group=self.gid, extra_groups=[], env=env or self.env(),
                                cwd=self.home, text=True, stdin=subprocess.DEVNULL, **kw)


# The test's own packages, for an interpreter outside this virtualenv (which may sit in root's home)
PYTHONPATH = os.pathsep.join([str(ROOT), *sysconfig.get_paths()["purelib"].split(os.pathsep)])


def _find_python(user: User) -> str | None:
    """This interpreter if ``user`` may run it, else the system's of the same minor version
    (same ABI: the virtualenv's compiled packages load in it), else None."""
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, f"/usr/bin/python{minor}", f"/usr/local/bin/python{minor}"):
        try:
            user.run(exe, "-c", "import gitrag.daemon.client, gitrag.surfaces.cli, mcp", timeout=60).check_returncode()
        except (OSError, subprocess.SubprocessError):
            continue
        return exe
    return None


@contextmanager
def created_user(prefix: str) -> Iterator[User]:
    """A fresh system user (skips the test where that is impossible: not root, no useradd)."""
    if os.getuid() != 0:
        pytest.skip("needs root to create a second user")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    name = f"{prefix}{uuid.uuid4().hex[:8]}"[:31]
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    home = Path(tempfile.mkdtemp(prefix=f"{name}-home-", dir="/tmp"))
    try:
        entry = pwd.getpwnam(name)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        os.chmod(home, 0o700)
        user = User(name, entry.pw_uid, entry.pw_gid, home)
        python = _find_python(user)
        if python is None:
            pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that another user may run "
                        f"({sys.executable} is not reachable for them)")
        user.python = python
        shutil.rmtree(f"/tmp/gitrag-{user.uid}", ignore_errors=True)  # a uid reused from an earlier run
        yield user
    finally:
        shutil.rmtree(home, ignore_errors=True)
        if "entry" in locals():
            shutil.rmtree(f"/tmp/gitrag-{entry.pw_uid}", ignore_errors=True)
        subprocess.run(["userdel", name], capture_output=True, check=False)


def git_repo(user: User, name: str = "repo") -> Path:
    """A repository of ``user`` with one commit, made by ``user`` (git refuses others' repositories)."""
    path = user.home / name
    steps = [["git", "init", "-q", "-b", "main", str(path)],
             ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
              "-m", "first"]]
    for cmd in steps:
        proc = user.run(*cmd)
        assert proc.returncode == 0, proc.stderr
    (path / "deploy.py").write_text("def deploy_key():\n    return 'secret'\n")
    os.chown(path / "deploy.py", user.uid, user.gid)
    for cmd in (["git", "-C", str(path), "add", "deploy.py"],
                ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code"]):
        proc = user.run(*cmd)
        assert proc.returncode == 0, proc.stderr
    return path
