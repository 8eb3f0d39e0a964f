"""A collection made before the store layouts (issue 21: float32 vectors in RAM, an HNSW
graph above 100 MB, no ``gitrag-layout`` file) is converted by the next sync to the layout
new collections get, from the vector cache: nothing is embedded again, the same points."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitrag.index import vectors as vectors_mod
from gitrag.index import views as views_mod
from gitrag.index.indexer import Indexer
from gitrag.index.state import State
from gitrag.index.store import edge as edge_mod
from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo
from tests.reliability import points


def _project(repo: Repo) -> None:
    for i in range(12):
        repo.write(f"pkg/mod{i:02}.py", f"class Service{i}:\n    def handle(self, request):\n"
                   f"        return request.respond({i})\n\n\ndef helper_{i}(n):\n    return sum(range(n)) + {i}\n")
        repo.write(f"docs/page{i:02}.md", f"# Page {i}\n\nHow service {i} answers requests.\n")
    repo.commit("a project")


def _unrounded(chunk_vec: np.ndarray, path_vec: np.ndarray) -> np.ndarray:
    """combine() as it was before the float16 store: float32 values, not rounded."""
    return vectors_mod.l2_normalise((chunk_vec + vectors_mod.PATH_WEIGHT * path_vec)[None, :])[0]


@pytest.mark.parametrize("old_layout", ["current", "lean", "compact"])
def test_a_collection_of_the_old_layout_is_converted_without_embedding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old_layout: str) -> None:
    repo = Repo(tmp_path / "repo")
    _project(repo)
    with monkeypatch.context() as old:  # the code before the layouts (or with the WAL), as it wrote its index
        old.setattr(edge_mod, "LAYOUT", edge_mod.LAYOUTS[old_layout])
        old.setattr(edge_mod, "LAYOUT_NAME", old_layout)
        if old_layout == "current":
            old.setattr(vectors_mod, "combine", _unrounded)
            old.setattr(views_mod, "combine", _unrounded)
        with open_workspace(repo.path) as ws:
            first = Indexer(ws).sync()
            collection = ws.store.root / ws.state.branch(ws.repo.branch()).collection
    config = json.loads((collection / "edge_config.json").read_text())
    if old_layout == "current":
        (collection / "gitrag-layout").unlink()  # the old code wrote none
        assert config["vectors"]["dense"].get("datatype") in (None, "float32")
    elif old_layout == "lean":
        assert (collection / "wal").is_dir()  # the engine's WAL, which the shipped layout drops
    before, manifest_before = points(repo.path)
    assert first.chunks_embedded > 0 and before

    monkeypatch.setattr(views_mod, "REBUILD_SLICE", 7)  # the rebuild reads the cache a slice at a time
    monkeypatch.setattr(views_mod, "REBUILD_PATHS", 5)  # and the manifest a few paths at a time
    asked: list[int | None] = []  # the paths of each manifest read (None: every path at once)
    real_snapshot = State.snapshot

    def snapshot(self: State, fingerprint: str, paths: Any = None) -> Any:
        wanted = None if paths is None else list(paths)
        asked.append(None if wanted is None else len(wanted))
        return real_snapshot(self, fingerprint, wanted)

    monkeypatch.setattr(State, "snapshot", snapshot)
    with open_workspace(repo.path) as ws:
        assert ws.store.outdated(collection.name)
        again = Indexer(ws).sync()
    monkeypatch.setattr(State, "snapshot", real_snapshot)
    assert asked and None not in asked and max(n for n in asked if n is not None) <= 5  # bounded, streamed
    with open_workspace(repo.path) as ws:
        assert not ws.store.outdated(collection.name)
        hits = ws.store.search(collection.name, dense=np.ones(ws.embedder.dim, dtype=np.float32), sparse=None,
                               limit=5, branch=None)
    assert again.chunks_embedded == 0 and again.paths_embedded == 0
    config = json.loads((collection / "edge_config.json").read_text())
    assert config["vectors"]["dense"]["datatype"] == "float16"
    assert (collection / "gitrag-layout").read_text().strip() == edge_mod.LAYOUT_NAME == "trim"
    assert not (collection / "wal").exists()  # the shipped layout keeps no engine WAL
    indexed = {p.name.split("-")[1] for p in collection.glob("segments/*/payload_index/*-*")}
    assert "path" in indexed and "symbol" not in indexed  # no query filters on the symbol
    after, manifest_after = points(repo.path)
    assert all("start_line" in json.loads(text) for text, _ in before.values())  # the old layouts: whole payloads
    assert {k for text, _ in after.values() for k in json.loads(text)} == {"path", "language"}  # what a filter reads
    assert after.keys() == before.keys() and manifest_after == manifest_before
    for pid, (_payload, vec) in after.items():  # the same vectors, as float16 keeps them
        assert np.allclose(vec, before[pid][1], atol=2e-3)
    assert len(hits) == 5


def test_a_collection_of_the_current_layout_is_left_as_it_is(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    _project(repo)
    with open_workspace(repo.path) as ws:
        Indexer(ws).sync()
        name = ws.state.branch(ws.repo.branch()).collection
        assert not ws.store.outdated(name)
        made = (ws.store.root / name / "gitrag-layout").stat().st_mtime_ns
    repo.write("pkg/new.py", "def fresh():\n    return 1\n")
    repo.commit("one more")
    with open_workspace(repo.path) as ws:
        summary = Indexer(ws).sync()
        assert (ws.store.root / name / "gitrag-layout").stat().st_mtime_ns == made  # not rebuilt
    assert summary.files_indexed == 1


def test_the_store_seals_segments_as_it_grows_and_scans_them_exactly(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.index.store import PointRecord, SparseVec
    from gitrag.index.store.edge import EdgeStore

    # the shipped layout at a small scale: seal every 64 points, segments of at most 2 KB of vectors
    monkeypatch.setattr(edge_mod, "LAYOUT", edge_mod.LAYOUTS["lean"]._replace(
        optimize_every=64, indexing_threshold_kb=1, max_segment_kb=2))
    rng = np.random.default_rng(5)
    dense = rng.standard_normal((300, 16)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    dense = dense.astype(np.float16).astype(np.float32)
    store = EdgeStore(tmp_path / "s")
    store.create_collection("gseal_1", 16)
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(300)]
    for start in range(0, 300, 32):  # a sync's batches, each flushed
        store.upsert("gseal_1", [PointRecord(ids[i], dense[i], SparseVec([i], [1.0]), {"path": f"f{i}.py"})
                                 for i in range(start, min(300, start + 32))])
        store.flush("gseal_1")
    segments = [json.loads(seg.read_text()) for seg in (tmp_path / "s" / "gseal_1" / "segments").glob("*/segment.json")]
    sealed = [s for s in segments if s["config"]["vector_data"]["dense"]["index"]["type"] != "plain"]
    assert len(sealed) >= 2  # sealed while writing, in more than one bounded segment
    q = dense[7]
    hits = store.search("gseal_1", dense=q, sparse=None, limit=10, branch=None)
    exact = np.argsort(-(dense @ q), kind="stable")[:10]
    assert {h.id for h in hits[:5]} == {ids[i] for i in exact[:5]}  # an exact scan, not a graph
    assert store.count("gseal_1") == 300
    store.close()
