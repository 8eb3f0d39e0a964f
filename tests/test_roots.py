"""A new branch is rooted where it differs least (gitrag.index.indexer.Indexer._choose_root):
a branch far from every root becomes a root itself, and a branch started near it later is
rooted at it, writing its own difference only; every branch's view stays its manifest, equal
to a fresh index's, through creation, edits, gc of a branch and a drop of a root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gitrag.daemon import gc
from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo
from tests.gitutil import index as sync

FILES = 30


def _module(i: int, version: str) -> str:
    return "".join(f"def step_{i}_{j}_{version}(value):\n    \"\"\"Step {j} of module {i}, {version}.\"\"\"\n"
                   f"    return value + {j}\n\n\n" for j in range(4))


def _view(path: Path, branch_name: str) -> dict[str, Any]:
    """{point id: payload} of a branch, asserting its view of the store is its manifest."""
    with open_workspace(path) as ws:
        branch = ws.state.branch(branch_name)
        assert branch is not None
        rows = {r.point_id: r.payload for r in ws.state.points(branch.name)}
        assert ws.store.ids(branch.collection, branch=branch.view) == set(rows), branch_name
        assert ws.store.ids(branch.collection) == set(ws.state.members(branch.fingerprint)), "orphan points"
        return rows


def _root(path: Path, name: str) -> str | None:
    with open_workspace(path) as ws:
        branch = ws.state.branch(name)
        assert branch is not None
        return branch.root


def _fresh(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> dict[str, Any]:
    old = os.environ["GITRAG_HOME"]
    monkeypatch.setenv("GITRAG_HOME", str(tmp_path / f"fresh-{name}"))
    try:
        sync(repo.path, branch=name)
        return _view(repo.path, name)
    finally:
        monkeypatch.setenv("GITRAG_HOME", old)


@pytest.fixture
def history(repo: Repo) -> Repo:
    """``old``: every file of an early version; ``main``: all but three rewritten since."""
    for i in range(FILES):
        repo.write(f"pkg/mod{i:02}.py", _module(i, "v1"))
    repo.commit("v1")
    repo.git("branch", "old")
    for i in range(3, FILES):
        repo.write(f"pkg/mod{i:02}.py", _module(i, "v2"))
    repo.commit("v2")
    return repo


def test_a_branch_near_a_far_branch_is_rooted_at_it(history: Repo, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    repo = history
    sync(repo.path)  # main: the first root
    far = sync(repo.path, branch="old")
    assert far.started_from == "main"
    assert _root(repo.path, "old") is None  # 3 of 30 files shared: a root
    repo.git("checkout", "-q", "-b", "fix", "old")
    repo.write("pkg/mod10.py", _module(10, "v1") + "def fixed():\n    return 1\n")
    repo.commit("a fix on the old release")
    near = sync(repo.path)
    assert near.started_from == "old"
    assert _root(repo.path, "fix") == "old"
    # its own difference: one file's points (new ones upserted, the old ones hidden), not the old release's 27 files
    assert near.points_upserted <= 6 and near.payloads_updated <= 6
    for name in ("main", "old", "fix"):
        assert _view(repo.path, name) == _fresh(repo, tmp_path, monkeypatch, name), name

    repo.git("checkout", "-q", "main")
    repo.write("pkg/mod05.py", _module(5, "v3"))
    repo.commit("main moves on")
    sync(repo.path)
    repo.git("branch", "-D", "fix")
    with open_workspace(repo.path) as ws:
        assert gc.drop_deleted(ws) == ["fix"]
    repo.git("checkout", "-q", "old")
    repo.write("pkg/mod11.py", _module(11, "v1b"))
    repo.commit("the old release moves on")
    sync(repo.path)
    for name in ("main", "old"):
        assert _view(repo.path, name) == _fresh(repo, tmp_path, monkeypatch, f"{name}"), name
    repo.git("checkout", "-q", "main")
    repo.git("branch", "-D", "old")
    with open_workspace(repo.path) as ws:
        assert gc.drop_deleted(ws) == ["old"]  # a root nothing is rooted at: its own paths only
    assert _view(repo.path, "main") == _fresh(repo, tmp_path, monkeypatch, "main")


def test_a_branch_near_its_root_keeps_it(history: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = history
    sync(repo.path)
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("pkg/mod20.py", _module(20, "v2") + "def extra():\n    return 2\n")
    repo.commit("one file")
    s = sync(repo.path)
    assert _root(repo.path, "topic") == "main"
    assert s.started_from == "main" and s.points_upserted <= 6
    assert _view(repo.path, "topic") == _fresh(repo, tmp_path, monkeypatch, "topic")
