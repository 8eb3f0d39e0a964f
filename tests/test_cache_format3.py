"""A vector cache and a commit index written by the code before the compact cache (issue 21:
``cache.db`` format 2, float16 vectors and float32 sparse weights; ``history.db`` format 2,
an FTS5 table keeping its text) are converted in place on first use by this code: nothing
is embedded again (the hash embedder's calls are counted), every vector becomes the int8 form
of what the old cache held, every sparse vector its term counts, and every answer, of the
code search and of the commit search, is what the old code gave; a collection rebuilt from the
converted cache embeds nothing either and lists the same chunks. The old code is this
repository's own, taken from its history (the tree just before the commit that made the
cache format 3), as tests/test_storage_format3.py does for the state.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitrag import config
from gitrag.git.repo import GitRepo
from gitrag.index import sparse
from gitrag.index.embedders.hashing import HashEmbedder
from gitrag.index.vector_cache import OUTLIERS, decode_key, decode_vector, stored_form, unpack_sparse
from tests.gitutil import Repo, index, project_package_before
from tests.reliability import functions

ROOT = Path(__file__).resolve().parent.parent
_MARK = 'FORMAT = "2"\n'
QUESTIONS = ["alpha answers", "beta_3", "how does gamma call alpha", "README alpha and beta"]
COMMIT_QUESTIONS = ["alpha", "beta gamma", "fix the readme"]

# prints the answers of the code search (the store's dense and sparse lists: what the cache and
# the store hold, not the ranking, which later code may change) and of the commit search, as JSON
# (run by both codes)
_ASK = """
import json, sys
from gitrag.index.history import HistoryIndex
from gitrag.index.workspace import open_workspace
from gitrag.query.retrieval import search
out = {"code": [], "commits": []}
with open_workspace(sys.argv[1]) as ws:
    for q in json.loads(sys.argv[2]):
        for mode in ("dense", "sparse"):
            out["code"].append([[r.path, r.start_line, r.end_line, round(r.score, 6)]
                                for r in search(ws, q, k=10, mode=mode, snippets=False)])
    h = HistoryIndex(ws.data_dir)
    for q in json.loads(sys.argv[3]):
        out["commits"].append([[c.oid, round(c.score, 6), [[f.status, f.path, f.old_path] for f in c.files]] for c in h.search("main", q, k=10)])
    h.close()
print("ANSWERS " + json.dumps(out))
"""


def _format2_code(tmp_path: Path) -> Path:
    """The gitrag package just before this conversion: the first parent of the commit of this
    repository's history that made the vector cache format 3 (so only the conversion lies
    between the two codes, and their answers can be compared)."""
    return project_package_before("gitrag/index/vector_cache.py", _MARK, tmp_path / "format2-code",
                                  "making the vector cache format 3")


def _answers(repo: Path, code: Path | None) -> dict[str, list]:
    env = {**os.environ}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    proc = subprocess.run([sys.executable, "-c", _ASK, str(repo), json.dumps(QUESTIONS), json.dumps(COMMIT_QUESTIONS)],
                          capture_output=True, text=True, env=env, cwd=str(code or ROOT), check=False)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ANSWERS "))
    return json.loads(line[len("ANSWERS "):])


def test_a_format2_cache_and_history_are_converted_in_place_without_embedding(
        repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_code = _format2_code(tmp_path)
    repo.write("pkg/a.py", functions("alpha", 4))
    repo.write("pkg/b.py", functions("beta", 3))
    repo.commit("add alpha and beta")
    repo.write("pkg/c.py", functions("gamma", 3) + "\n\ndef gamma_alpha():\n    return alpha_1() + beta_2()\n")
    repo.commit("gamma calls alpha")
    repo.write("README.md", "# Alpha and beta\n\nHow alpha answers beta, and gamma both.\n")
    repo.commit("fix the readme")
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(repo.path)],
                          capture_output=True, text=True, env=env, cwd=old_code, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["chunks_embedded"] > 0
    before = _answers(repo.path, old_code)
    assert all(before["code"]) and all(before["commits"])

    cache_path = config.data_root() / "cache.db"
    history_path = config.repo_data_dir(GitRepo(repo.path).common_dir) / "history.db"
    with sqlite3.connect(cache_path) as db:  # what the old code wrote, read as it is
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("2",)
        fps = dict(db.execute("SELECT id, name FROM fingerprints"))
        old_vectors = {(decode_key(k), fps[f]): np.frombuffer(v, dtype=np.float16).astype(np.float32)
                       for k, f, v in db.execute("SELECT key, fp, vec FROM vectors")}
        old_sparse = {}
        for k, v, data in db.execute("SELECT key, version, data FROM sparse"):
            n = int(np.frombuffer(data[:4], dtype=np.uint32)[0])
            old_sparse[(decode_key(k), v)] = (np.frombuffer(data[4:4 + 4 * n], dtype=np.uint32).tolist(),
                                              np.frombuffer(data[4 + 4 * n:], dtype=np.float32).tolist())
    with sqlite3.connect(history_path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("2",)
    old_bytes = 2 * sum(v.size for v in old_vectors.values()) + sum(4 + 8 * len(i) for i, _ in old_sparse.values())
    assert old_vectors and old_sparse

    embedded: list[str] = []
    real = HashEmbedder.embed_documents

    def counted(self: HashEmbedder, texts: list[str]) -> np.ndarray:
        embedded.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed_documents", counted)
    s = index(repo.path)  # first use by this code: the cache is converted as it opens
    assert embedded == [] and s.chunks_embedded == 0 and s.paths_embedded == 0 and s.chunks_total > 0

    with sqlite3.connect(cache_path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("3",)
        fps = dict(db.execute("SELECT id, name FROM fingerprints"))
        rows = {(decode_key(k), fps[f]): v for k, f, v in db.execute("SELECT key, fp, vec FROM vectors")}
        sparse_rows = {(decode_key(k), v): d for k, v, d in db.execute("SELECT key, version, data FROM sparse")}
    assert rows.keys() == old_vectors.keys() and sparse_rows.keys() == old_sparse.keys()
    for key, old in old_vectors.items():  # the int8 form of the old vector: scale, 4 kept components, 1 byte a dimension
        assert len(rows[key]) == 4 + 1 + 4 * OUTLIERS + old.size
        assert np.array_equal(decode_vector(rows[key]), stored_form(old))
    for (key, version), (ids, values) in old_sparse.items():  # the counts give the old weights back exactly
        assert sparse_rows[(key, version)][0] == 1  # uint8 counts
        back = unpack_sparse(sparse_rows[(key, version)], version)
        assert version == sparse.VERSION and back.indices == ids and back.values == values
    new_bytes = sum(map(len, rows.values())) + sum(map(len, sparse_rows.values()))
    assert new_bytes < 0.7 * old_bytes  # (a file this small is its tables' first pages either way)
    with sqlite3.connect(history_path) as db:
        assert db.execute("SELECT value FROM meta WHERE key='format'").fetchone() == ("3",)
        ddl = db.execute("SELECT sql FROM sqlite_master WHERE name='commit_text'").fetchone()[0]
        assert "content=''" in ddl
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE name='commit_text_content'").fetchone() == (0,)
        assert {type(f) for (f,) in db.execute("SELECT files FROM commits")} == {bytes}  # zlib of the JSON

    # the same answers, code and commits; the old code's collection (store layout "compact",
    # whole payloads) was rebuilt from the converted cache by that sync (layout "trim"), so
    # its dense cosines moved within the int8 step
    converted = _answers(repo.path, None)
    assert converted["commits"] == before["commits"]
    _same_lists(converted["code"], before["code"])
    # a collection rebuilt from the converted cache: still nothing embedded; the sparse lists
    # exactly the old ones (the counts give the weights back bit for bit), the dense lists
    # the same citations with cosines within the int8 step
    s = index(repo.path, rebuild=True)
    assert embedded == [] and s.chunks_embedded == 0 and s.paths_embedded == 0
    after = _answers(repo.path, None)
    assert after["commits"] == before["commits"]
    _same_lists(after["code"], before["code"])


def _same_lists(lists: list[list[list[Any]]], old: list[list[list[Any]]]) -> None:
    """The code search's lists (dense, sparse, per question) against the old code's: the
    sparse lists the same citations in the same order with scores within 1e-5 (a collection
    rebuilt from the cache sums the same float32 weights, in the engine's order), the dense
    ones the same citations with cosines within the int8 step."""
    for i, (got, want) in enumerate(zip(lists, old, strict=True)):
        if i % 2:  # sparse
            assert [r[:3] for r in got] == [r[:3] for r in want]
            assert all(abs(a[3] - b[3]) <= 1e-5 * max(1.0, abs(b[3])) for a, b in zip(got, want, strict=True))
        else:
            assert {tuple(r[:3]) for r in got} == {tuple(r[:3]) for r in want}
            assert all(abs(a[3] - b[3]) < 0.02 for a, b in zip(sorted(got), sorted(want), strict=True))


def test_int8_vectors_are_exact_in_float16_and_quantising_them_again_changes_nothing() -> None:
    """The stored form (int8, a per-row scale, the 4 largest components kept as float16) is
    what the embedded store keeps bit for bit (float16), and encoding it again gives the same
    bytes: a point's vector is the same whether its chunk was embedded now or read back."""
    from gitrag.index.vector_cache import encode_vectors

    rng = np.random.default_rng(7)
    peaked = rng.standard_normal((500, 256)).astype(np.float32)
    peaked[:, 1] *= 12  # one dominant component, as the static model's vectors have
    hashed = HashEmbedder().embed_documents([f"def f_{i}(x):\n    return x + {i}" for i in range(300)])
    for matrix in (peaked / np.linalg.norm(peaked, axis=1, keepdims=True), hashed,
                   np.zeros((2, 16), np.float32), np.array([[0.0, 2.0, -1.0]], np.float32)):
        data = encode_vectors(list(matrix))
        back = np.stack([decode_vector(d) for d in data])
        assert np.array_equal(back.astype(np.float16).astype(np.float32), back)
        assert encode_vectors(list(back)) == data
        assert all(np.array_equal(stored_form(v), b) for v, b in zip(matrix[:20], back[:20], strict=True))
        step = np.abs(matrix).max(axis=1, keepdims=True) / 127
        assert (np.abs(back - matrix) <= step).all()  # within one step of the row's largest component
    with pytest.raises(ValueError):
        decode_vector(data[0][:3])


def test_stored_forms_of_a_matrix_are_each_rows_stored_form_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass form the workers use gives, row by row, the bytes of the one-vector
    form: real static-model vectors of real source, rows already in stored form, zero rows,
    a row of equal components, and the float16 layout kept for measuring."""
    from gitrag.index import vector_cache
    from gitrag.index.embedders.static import StaticEmbedder

    texts = [p.read_text(encoding="utf-8") for p in sorted(Path(vector_cache.__file__).parent.glob("*.py"))]
    texts = [t[i : i + 1500] for t in texts for i in range(0, len(t), 1500)] + ["", "x"]
    vecs = StaticEmbedder().embed_documents(texts)
    assert len(vecs) > 200
    odd = np.zeros((3, vecs.shape[1]), np.float32)
    odd[1] = 1 / np.sqrt(vecs.shape[1])  # every component the same magnitude
    for matrix in (vecs, vector_cache.stored_forms(vecs), odd, vecs[:0]):
        got = vector_cache.stored_forms(matrix)
        want = np.stack([stored_form(v) for v in matrix]) if len(matrix) else np.zeros((0, vecs.shape[1]), np.float32)
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    monkeypatch.setattr(vector_cache, "DENSE", "float16")
    assert vector_cache.stored_forms(vecs).tobytes() == np.stack([stored_form(v) for v in vecs]).tobytes()
    with pytest.raises(ValueError):
        vector_cache.stored_forms(vecs[0])


def test_sparse_rows_give_the_bm25_weights_back_exactly() -> None:
    """Term counts (uint8, uint16 past 255) give the float32 weights of
    gitrag.index.sparse.document_vector back bit for bit; a vector they cannot (not made by
    this weighting) keeps its float32 weights; another version's counts are not read."""
    from gitrag.index.records import SparseVec
    from gitrag.index.vector_cache import pack_sparse

    texts = ["def alpha_beta(x):\n    return alpha(x) + beta", "word " * 300 + "other", "", "x = 1"]
    for text in texts:
        vec = sparse.document_vector(text)
        data = pack_sparse(vec, sparse.VERSION)
        assert data[0] == (2 if "word " * 300 in text else 1)
        back = unpack_sparse(data, sparse.VERSION)
        assert back.indices == vec.indices
        assert back.values == [float(v) for v in np.asarray(vec.values, dtype=np.float32)]
        with pytest.raises(ValueError):
            unpack_sparse(data, "another")
    odd = SparseVec([3, 9], [0.25, 0.7])
    data = pack_sparse(odd, sparse.VERSION)
    assert data[0] == 0 and unpack_sparse(data, sparse.VERSION) == SparseVec([3, 9], [0.25, float(np.float32(0.7))])
