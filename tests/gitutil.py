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


def project_package_at(rev: str, out: Path) -> Path:
    """``out`` (created) holding the ``gitrag`` package of this repository at ``rev`` (git archive),
    to run an older gitrag with ``PYTHONPATH=out``."""
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(PROJECT), "archive", rev, "gitrag"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out
