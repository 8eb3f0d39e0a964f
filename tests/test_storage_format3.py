"""An index written by the code before the compact storage (issue 21: ``state.db`` format 2,
a store collection of the "lean" layout with the engine's WAL) is converted on first use,
with nothing embedded again: the state in place (payload JSON without the fields its
columns hold, compressed symbol graphs, no ``points_by_hash``, ``points_by_path`` without
the variant), the collection rebuilt
from the vector cache in the shipped layout (no WAL, "trim"). Afterwards the index equals a
from-scratch index by this code (lost = wrong = 0). The old code is this repository's own,
taken from its history (the newest commit whose state is format 2), as tests/test_storage.py
does for format 1.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag import config
from gitrag.git.repo import GitRepo
from gitrag.index.state import FORMAT_VERSION, State, graph_text
from gitrag.index.store import edge as edge_mod
from tests.gitutil import Repo, index, project_git, project_package_at
from tests.reliability import compare, functions, points
from tests.test_storage import fresh_points, paths_found

ROOT = Path(__file__).resolve().parent.parent
_MARK = "FORMAT_VERSION = 2\n"
_LEAN = 'in LAYOUTS else "lean"'


def _format2_code(tmp_path: Path) -> Path:
    """The gitrag package of the newest commit of this repository whose state is format 2
    and whose store layout is "lean" (the code before this conversion)."""
    revs = project_git("log", "--format=%H", "-n", "50", "--", "gitrag/index/state.py", "gitrag/index/store/edge.py").split()
    for rev in revs:
        if (_MARK in project_git("show", f"{rev}:gitrag/index/state.py")
                and _LEAN in project_git("show", f"{rev}:gitrag/index/store/edge.py")):
            break
    else:
        pytest.skip("no commit with state format 2 and the lean store layout in this history")
    return project_package_at(rev, tmp_path / "format2-code")


def test_an_index_of_format_2_is_converted_without_embedding(repo: Repo, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    old_code = _format2_code(tmp_path)
    repo.write("pkg/a.py", functions("alpha", 4))
    repo.write("pkg/b.py", functions("beta", 3))
    repo.write("README.md", "# Alpha and beta\n\nHow alpha answers beta.\n")
    repo.commit("A")
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    env.pop("GITRAG_STORE_LAYOUT", None)
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(repo.path)],
                          capture_output=True, text=True, env=env, cwd=old_code, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["chunks_embedded"] > 0
    data = config.repo_data_dir(GitRepo(repo.path).common_dir)
    with sqlite3.connect(data / "state.db") as db:  # what the old code wrote, read as it is
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("2",)
        old_payloads = {pid: json.loads(p) for pid, p in db.execute("SELECT point_id, payload FROM points")}
        old_graphs = dict(((b, v), d) for b, v, d in db.execute("SELECT blob, variant, data FROM symbols"))
    collection = next(p for p in (data / "qdrant").iterdir() if (p / "edge_config.json").is_file())
    assert (collection / "gitrag-layout").read_text().strip() == "lean" and (collection / "wal").is_dir()
    assert old_payloads and old_graphs and all(isinstance(d, str) for d in old_graphs.values())

    s = index(repo.path)  # first use by this code
    assert s.chunks_embedded == 0 and s.paths_embedded == 0 and s.chunks_total == len(old_payloads)

    with sqlite3.connect(data / "state.db") as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == (str(FORMAT_VERSION),)
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index' AND tbl_name='points'")}
        assert "points_by_path" in indexes and not indexes & {"points_by_hash", "points_by_file"}
        stored = dict(db.execute("SELECT point_id, payload FROM points"))
        graphs = dict(((b, v), d) for b, v, d in db.execute("SELECT blob, variant, data FROM symbols"))
    assert all("path" not in json.loads(p) and "chunk_hash" not in json.loads(p) for p in stored.values())
    assert graphs.keys() == old_graphs.keys() and all(isinstance(d, bytes) for d in graphs.values())
    assert all(json.loads(graph_text(graphs[k])) == json.loads(old_graphs[k]) for k in graphs)
    state = State(data)
    try:  # the manifest reads back exactly as the old code wrote it
        branch = state.branches()[0]
        assert {r.point_id: r.payload for r in state.points(branch.name)} == old_payloads
    finally:
        state.close()
    assert (collection / "gitrag-layout").read_text().strip() == edge_mod.LAYOUT_NAME == "trim"
    assert not (collection / "wal").exists()
    assert "pkg/a.py" in paths_found(repo.path, "alpha")
    # the collection was rebuilt from the converted cache: each vector the int8 form of the old
    # float16 one, a fresh index's the int8 form of the float32 embedding (a step apart at most)
    step = 1 / 127
    assert compare(points(repo.path), fresh_points(repo.path, tmp_path, monkeypatch, "embedded"), step) == (0, 0)
