"""Real git repositories in tmp dirs for tests: write files, commit, branch, run git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitrag.index.indexer import IndexSummary

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class Repo:
    """A git repository at ``path`` driven through the real git binary."""

    def __init__(self, path: Path, branch: str = "main") -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", branch)
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
        full_env = {**os.environ, **GIT_ENV, **(env or {})}
        proc = subprocess.run(
            ["git", *args], cwd=self.path, env=full_env, capture_output=True, text=True, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout.strip()

    def write(self, rel: str, content: str | bytes) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        return target

    def commit(self, message: str = "change", *paths: str) -> str:
        self.git("add", "-A", *paths)
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


def index(path: Path, **kw: Any) -> IndexSummary:
    """Sync the repository at ``path`` in-process (the test's GITRAG_HOME); ``kw`` go to
    ``Indexer.sync`` (``rebuild=True``)."""
    from gitrag.index.indexer import Indexer
    from gitrag.index.workspace import open_workspace

    ws = open_workspace(path)
    try:
        return Indexer(ws).sync(**kw)
    finally:
        ws.close()


PROJECT = Path(__file__).resolve().parent.parent  # this repository, whose history holds older gitrag code


def project_git(*args: str) -> str:
    """stdout of ``git -C <this repository> ARGS``; skips the test where the checkout has no
    git history to read (an exported tree)."""
    import pytest

    try:
        return subprocess.run(["git", "-C", str(PROJECT), *args], capture_output=True, text=True, check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip("needs this repository's git history (an older gitrag's code)")


def project_package_before(path: str, mark: str, out: Path, what: str) -> Path:
    """``out`` holding the ``gitrag`` package of this repository just before the commit that took
    ``mark`` out of ``path`` (the first parent of the newest commit whose ``path`` lacks it while
    its predecessor's has it): the old format's code, so only the conversion lies between the two.
    Skips the test (saying ``what``) when the recent history has no such commit."""
    import pytest

    revs = project_git("log", "--format=%H", "-n", "200", "--", path).split()
    marks = [mark in project_git("show", f"{r}:{path}") for r in revs]
    rev = next((f"{r}^" for r, old, older in zip(revs, marks, marks[1:], strict=False) if not old and older), None)
    if rev is None:
        pytest.skip(f"no commit {what} in this history")
    return project_package_at(rev, out)


def project_package_at(rev: str, out: Path) -> Path:
    """``out`` (created) holding the ``gitrag`` package of this repository at ``rev`` (git archive),
    to run an older gitrag with ``PYTHONPATH=out``."""
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(PROJECT), "archive", rev, "gitrag"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out
