"""The store's optimizer runs once enough changed, not after every sync (gitrag.index.views.settle,
issue 21): a small change of a big collection leaves it for later, the count of writes since it
last ran is kept in the state across processes, it runs once past the threshold, and gc runs it
for what is left. Every answer in between is the one a fresh index gives."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitrag.daemon import gc
from gitrag.index import views
from gitrag.index.indexer import Indexer
from gitrag.index.store.edge import EdgeStore
from gitrag.index.workspace import open_workspace
from gitrag.query.retrieval import search
from tests.gitutil import Repo
from tests.gitutil import index as sync

MODULES = 60


def _module(i: int, extra: str = "") -> str:
    body = "".join(f"def handler_{i}_{j}(request, n={j}):\n    \"\"\"Handle request {j} of module {i}.\"\"\"\n"
                   f"    total = sum(range(n))\n    return request.respond(total + {i})\n\n\n" for j in range(6))
    return f"import os\n\n\nclass Service{i}:\n    name = 'svc{i}'\n\n\n" + body + extra


def _new_function(name: str) -> str:
    return f"def {name}(basket):\n    \"\"\"Weigh the {name} basket of apples.\"\"\"\n    return len(basket) * 3\n"


@pytest.fixture
def optimizes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The collections the real engine's optimizer ran on, in order (it still runs)."""
    calls: list[str] = []
    real = EdgeStore.optimize

    def counted(self: EdgeStore, name: str) -> None:
        calls.append(name)
        real(self, name)

    monkeypatch.setattr(EdgeStore, "optimize", counted)
    yield calls


@pytest.fixture
def big(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """~480 points; the optimizer's threshold lowered to 80 writes (the shipped one is 16,384),
    under OPTIMIZE_SHARE of the collection (96 points)."""
    monkeypatch.setattr(views, "OPTIMIZE_EVERY", 80)
    for i in range(MODULES):
        repo.write(f"pkg/mod{i:02}.py", _module(i))
    repo.commit("a project")
    return repo


def _pending(path: Path) -> tuple[int, str]:
    with open_workspace(path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        assert branch is not None
        return ws.state.unoptimized(branch.collection).total, branch.collection


def _assert_right(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, optimizes: list[str],
                  finds: str | None = None) -> None:
    """The branch's view of the store is its manifest, equal to a fresh index's (ids and
    payloads), and ``finds`` is the top result for a question about it. The fresh index's
    own optimize is left out of ``optimizes``."""
    seen = len(optimizes)
    with open_workspace(path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        assert branch is not None
        rows = {r.point_id: r.payload for r in ws.state.points(branch.name)}
        assert ws.store.ids(branch.collection, branch=branch.view) == set(rows)
        assert ws.store.ids(branch.collection) == set(ws.state.members(branch.fingerprint))
        if finds is not None:
            top = search(ws, f"weigh the {finds} basket of apples", k=3)
            assert top and top[0].symbol == finds, [(r.path, r.symbol) for r in top]
    old = os.environ["GITRAG_HOME"]
    monkeypatch.setenv("GITRAG_HOME", str(tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}"))
    try:
        sync(path)
        with open_workspace(path) as fresh:
            fb = fresh.state.branch(fresh.repo.branch())
            assert fb is not None
            want = {r.point_id: r.payload for r in fresh.state.points(fb.name)}
            assert fresh.store.ids(fb.collection, branch=fb.view) == set(want)
    finally:
        monkeypatch.setenv("GITRAG_HOME", old)
        del optimizes[seen:]
    assert rows == want


def _writes(summary: Any) -> int:
    return summary.points_upserted + summary.points_deleted + summary.payloads_updated


def test_a_small_change_of_a_big_collection_leaves_the_optimizer_until_enough_changed(
        big: Repo, optimizes: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = sync(big.path)
    assert views.OPTIMIZE_EVERY < views.OPTIMIZE_SHARE * first.points_upserted  # the count decides, not the share
    assert len(optimizes) == 1  # a first index: every point is new (OPTIMIZE_SHARE of the collection)
    assert _pending(big.path)[0] == 0
    optimizes.clear()

    counted = 0
    for n in range(20):  # one file a commit, each sync a new process's workspace (tests.gitutil.index)
        name = f"apples_{n}"
        big.write(f"pkg/mod{n:02}.py", _module(n, "\n\n" + _new_function(name)))
        big.commit(f"edit {n}")
        s = sync(big.path)
        pending, collection = _pending(big.path)
        if optimizes:
            assert optimizes == [collection]  # once, in the sync that crossed the threshold
            assert counted + _writes(s) >= views.OPTIMIZE_EVERY and pending == 0
            break
        counted += _writes(s)
        assert 0 < _writes(s) < 30
        assert pending == counted  # kept in the state: each sync ran in its own workspace
        if n in (0, 2):
            _assert_right(big.path, tmp_path, monkeypatch, optimizes, finds=name)  # right while nothing was optimized
    else:
        raise AssertionError(f"never optimized after {counted} writes")
    assert counted < views.OPTIMIZE_EVERY
    _assert_right(big.path, tmp_path, monkeypatch, optimizes, finds=name)


def test_a_new_branch_with_a_few_changed_files_does_not_optimize(
        big: Repo, optimizes: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sync(big.path)
    optimizes.clear()
    big.git("checkout", "-q", "-b", "topic")
    for n in range(3):
        big.write(f"pkg/mod{n:02}.py", _module(n, "\n\n" + _new_function(f"pears_{n}")))
    big.commit("three files")
    s = sync(big.path)
    assert s.started_from == "main" and s.chunks_embedded < 10 and s.points_upserted > 0
    assert optimizes == []
    _assert_right(big.path, tmp_path, monkeypatch, optimizes, finds="pears_1")
    big.git("checkout", "-q", "main")
    assert sync(big.path).points_upserted == 0  # a switch back writes nothing
    assert optimizes == []
    _assert_right(big.path, tmp_path, monkeypatch, optimizes)


def test_gc_runs_the_optimizer_for_the_writes_left(big: Repo, optimizes: list[str]) -> None:
    sync(big.path)
    big.write("pkg/mod00.py", _module(0, "\n\n" + _new_function("plums")))
    big.commit("one file")
    sync(big.path)
    pending, collection = _pending(big.path)
    assert pending > 0
    optimizes.clear()
    with open_workspace(big.path) as ws:
        result = gc.full_pass(ws, {"main"}, cache=False)
        assert result["optimized"] == [collection] and result["errors"] == []
        assert ws.state.unoptimized(collection).total == 0
        assert gc.full_pass(ws, {"main"}, cache=False)["optimized"] == []  # nothing left
        assert search(ws, "weigh the plums basket of apples", k=1)[0].symbol == "plums"
    assert optimizes == [collection]
    big.write("pkg/mod01.py", _module(1, "\n\n" + _new_function("quinces")))
    big.commit("another file")
    sync(big.path)
    assert _pending(big.path)[0] > 0
    with open_workspace(big.path) as ws:  # the daemon's hourly pass too
        assert gc.scheduled_pass(ws, {"main"}, time.time())["optimized"] == [collection]
        assert ws.state.unoptimized(collection).total == 0
    assert optimizes == [collection, collection]


def test_a_change_of_a_fifth_of_a_small_collection_optimizes(repo: Repo, optimizes: list[str]) -> None:
    for i in range(4):
        repo.write(f"pkg/mod{i}.py", _module(i))
    repo.commit("small")
    sync(repo.path)
    optimizes.clear()
    repo.write("pkg/mod0.py", _module(0, "\n\n" + _new_function("figs")))  # a quarter of the files
    repo.commit("one of four")
    with open_workspace(repo.path) as ws:
        s = Indexer(ws).sync()
        assert _writes(s) >= views.OPTIMIZE_SHARE * ws.store.count(ws.collection())
    assert len(optimizes) == 1
    assert _pending(repo.path)[0] == 0


def test_the_point_count_a_sync_keeps_is_the_manifests(big: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync counts the points of the paths it touched, not the whole manifest (State.counted_points):
    the total it reports is the manifest's count through edits, deletions, a new branch, a no-op,
    a sync that fails half way, and a branch dropped and made again."""
    from gitrag.index import indexer

    def check(s: Any) -> None:
        with open_workspace(big.path) as ws:
            assert s.chunks_total == ws.state.point_count(s.branch), s.branch

    check(sync(big.path))
    big.write("pkg/mod00.py", _module(0, "\n\n" + _new_function("dates")))
    big.git("rm", "-q", "pkg/mod01.py")
    big.commit("edit and delete")
    check(sync(big.path))
    check(sync(big.path))  # nothing changed
    big.git("checkout", "-q", "-b", "topic")
    big.write("pkg/new.py", _new_function("limes"))
    big.write("pkg/mod02.py", "x = 1\n")
    big.commit("new file, shrunk file")
    check(sync(big.path))
    monkeypatch.setattr(indexer, "BATCH_FILES", 1)
    for n in range(3, 8):
        big.write(f"pkg/mod{n:02}.py", _module(n, "\n\n" + _new_function(f"kiwis_{n}")))
    big.commit("five files")
    real = indexer.Indexer._write_batch
    done: list[int] = []

    def failing(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(done) == 2:
            raise RuntimeError("the machine stops half way")
        done.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(indexer.Indexer, "_write_batch", failing)
    with pytest.raises(RuntimeError):
        sync(big.path)
    monkeypatch.setattr(indexer.Indexer, "_write_batch", real)
    check(sync(big.path))  # the journaled paths redone: counted anew
    big.git("checkout", "-q", "main")
    big.git("branch", "-D", "topic")
    with open_workspace(big.path) as ws:
        assert gc.drop_deleted(ws) == ["topic"]
    big.git("checkout", "-q", "-b", "topic")
    check(sync(big.path))
