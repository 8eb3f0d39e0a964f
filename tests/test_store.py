"""One contract for both vector stores: Qdrant Edge (embedded) and qdrant-client (server).

The server backend runs in qdrant-client's local mode, which stands in for a server. The
data are hand-made so every expected ranking is known before the engine is asked.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitrag.errors import StoreError
from gitrag.index.store import RRF_K, Hit, PointRecord, SearchFilter, SparseVec, Store
from gitrag.index.store import edge as edge_mod
from gitrag.index.store.edge import EdgeStore
from gitrag.index.store.server import ServerStore

DIM = 8
COLL = "gabc_main"
BACKENDS = ["embedded", "server"]


def pid(label: str) -> str:
    """A stable UUID string for a readable label."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, label))


def unit(*xs: float) -> np.ndarray:
    """An L2-normalised float32 vector of DIM, from its leading components."""
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def payload(path: str, language: str = "python", symbol: str = "", branches: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {
        "path": path, "blob": "0" * 40, "start_byte": 0, "end_byte": 10, "start_line": 1,
        "end_line": 2, "symbol": symbol or path, "kind": "function", "language": language,
        "chunk_hash": "f" * 64, "branches": list(branches),
    }  # fmt: skip


def point(label: str, dense: np.ndarray, terms: dict[int, float], **fields: Any) -> PointRecord:
    indices = sorted(terms)
    return PointRecord(pid(label), dense, SparseVec(indices, [terms[i] for i in indices]), payload(**fields))


def make_store(kind: str, tmp_path: Path) -> Store:
    return EdgeStore(tmp_path / "edge") if kind == "embedded" else ServerStore(":memory:")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(request.param, tmp_path)
    yield s
    s.close()


# Dense order for query unit(1): a > b > c > d > e (cosines 1, .95, .8, .5, 0).
# Term 7 is in every point (common), term 9 only in c (rare), term 8 in a and d.
CORPUS = [
    point("a", unit(1, 0), {7: 1.0, 8: 1.0}, path="src/a.py"),
    point("b", unit(0.95, math.sqrt(1 - 0.95**2)), {7: 1.0}, path="src/click/b.py"),
    point("c", unit(0.8, 0.6), {7: 1.0, 9: 1.0}, path="srcx/c.go", language="go"),
    point("d", unit(0.5, math.sqrt(0.75)), {7: 2.0, 8: 0.5}, path="docs/src/d.md", language="markdown",
          branches=("main", "topic")),
    point("e", unit(0, 1), {7: 1.0}, path="src/e.go", language="go", branches=("topic",)),
]  # branch membership: a, b, c on main only; d on both; e on topic only
LABEL = {pid(x): x for x in "abcde"}


@pytest.fixture
def filled(store: Store) -> Store:
    """A fresh store holding CORPUS, for tests that write."""
    store.create_collection(COLL, DIM)
    store.upsert(COLL, CORPUS)
    return store


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A store holding CORPUS shared by the read-only tests of this module (keeps them fast)."""
    s = make_store(request.param, tmp_path_factory.mktemp("corpus"))
    s.create_collection(COLL, DIM)
    s.upsert(COLL, CORPUS)
    s.flush(COLL)
    yield s
    s.close()


def labels(hits: list[Hit]) -> list[str]:
    return [LABEL.get(h.id, h.id) for h in hits]


def idf(n_with_term: int, n_total: int) -> float:
    """Qdrant's IDF modifier (BM25 form)."""
    return math.log(1 + (n_total - n_with_term + 0.5) / (n_with_term + 0.5))


# -- collections ----------------------------------------------------------------------


def test_collection_lifecycle(store: Store) -> None:
    assert not store.has_collection(COLL)
    store.create_collection(COLL, DIM)
    store.create_collection(COLL, DIM)  # idempotent
    store.create_collection("gabc_other", DIM)
    assert store.has_collection(COLL)
    assert store.list_collections() == ["gabc_main", "gabc_other"]
    assert store.count(COLL) == 0 and store.ids(COLL) == set()
    store.drop_collection(COLL)
    store.drop_collection(COLL)  # missing: no error
    assert not store.has_collection(COLL)
    assert store.list_collections() == ["gabc_other"]


def test_create_with_another_dim_is_refused(store: Store) -> None:
    store.create_collection(COLL, DIM)
    with pytest.raises(StoreError, match="embedder changed"):
        store.create_collection(COLL, DIM * 2)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "-x", "x y"])
def test_unsafe_collection_names_are_refused(store: Store, name: str) -> None:
    with pytest.raises(StoreError, match="invalid collection name"):
        store.create_collection(name, DIM)


def test_missing_collection_is_a_store_error(store: Store) -> None:
    for call in (
        lambda: store.count("gabc_none"),
        lambda: store.ids("gabc_none"),
        lambda: store.upsert("gabc_none", CORPUS[:1]),
        lambda: store.search("gabc_none", branch=None, dense=unit(1), sparse=None, limit=3),
    ):
        with pytest.raises(StoreError, match="does not exist"):
            call()


# -- writes ---------------------------------------------------------------------------


def test_upsert_is_idempotent_and_replaces(filled: Store) -> None:
    filled.upsert(COLL, CORPUS)
    assert filled.count(COLL) == 5
    moved = point("a", unit(0, 0, 1), {5: 1.0}, path="src/renamed.py")
    filled.upsert(COLL, [moved])
    assert filled.count(COLL) == 5
    hit = filled.search(COLL, branch=None, dense=unit(0, 0, 1), sparse=None, limit=1)[0]
    assert (LABEL[hit.id], hit.payload["path"]) == ("a", "src/renamed.py")
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_ids_and_count(filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gitrag.index.store.edge._SCROLL_PAGE", 2)  # several pages
    monkeypatch.setattr("gitrag.index.store.server._SCROLL_PAGE", 2)
    assert filled.ids(COLL) == {pid(x) for x in "abcde"}
    assert filled.count(COLL) == 5


def test_delete_ignores_missing_ids(filled: Store) -> None:
    filled.delete(COLL, [pid("b"), pid("nope"), str(uuid.uuid4())])
    filled.delete(COLL, [])
    assert filled.ids(COLL) == {pid(x) for x in "acde"}


def test_delete_path_matches_exactly(filled: Store) -> None:
    filled.upsert(COLL, [point("a2", unit(1), {7: 1.0}, path="src/a.py"), point("ax", unit(1), {}, path="src/a.pyx")])
    filled.delete_path(COLL, "src/a.py")
    filled.delete_path(COLL, "not/indexed.py")
    assert filled.ids(COLL) == {pid(x) for x in ("b", "c", "d", "e", "ax")}


def test_set_payload_overwrites_named_fields_only(filled: Store) -> None:
    filled.set_payload(COLL, {pid("a"): {"start_line": 40, "end_line": 50}, pid("ghost"): {"symbol": "x"}})
    hit = filled.search(COLL, branch=None, dense=unit(1), sparse=None, limit=1)[0]
    assert hit.payload == {**payload("src/a.py"), "start_line": 40, "end_line": 50}
    assert filled.ids(COLL) == {pid(x) for x in "abcde"}  # the ghost was not created


def test_payload_is_stored_as_given(corpus: Store) -> None:
    """Coordinates only: the store adds nothing (no source text) and drops nothing."""
    hits = corpus.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([7], [1.0]), limit=10)
    by_id = {p.id: p.payload for p in CORPUS}
    assert len(hits) == 5
    for hit in hits:
        assert hit.payload == by_id[hit.id]
        assert not {"text", "content", "source", "snippet"} & hit.payload.keys()


@pytest.mark.parametrize(("dense", "terms"), [(unit(1), None), (None, SparseVec([7, 8], [1.0, 1.0])),
                                             (unit(1), SparseVec([8, 9], [1.0, 1.0]))])
def test_a_search_without_payloads_gives_the_same_hits_bare(corpus: Store, dense: Any, terms: Any) -> None:
    """Ids and scores only, the same hits in the same order, in every mode and under a scope."""
    for scope, branch in ((None, None), (SearchFilter(path_prefix="src/"), "main")):
        full = corpus.search(COLL, branch=branch, dense=dense, sparse=terms, limit=5, scope=scope)
        bare = corpus.search(COLL, branch=branch, dense=dense, sparse=terms, limit=5, scope=scope, with_payload=False)
        assert full and all(h.payload for h in full)
        assert [(h.id, h.score, h.payload) for h in bare] == [(h.id, h.score, {}) for h in full]


def test_payloads_by_id_are_the_ones_a_search_returns(corpus: Store) -> None:
    hits = corpus.search(COLL, branch=None, dense=unit(1), sparse=None, limit=5)
    wanted = [hits[3].id, hits[0].id, pid("missing")]
    assert corpus.payloads(COLL, wanted) == {h.id: h.payload for h in (hits[0], hits[3])}  # the missing id left out
    assert corpus.payloads(COLL, []) == {}
    with pytest.raises(StoreError, match="does not exist"):
        corpus.payloads("gabc_none", wanted)


def test_records_read_only_the_payload_fields_asked_for(corpus: Store) -> None:
    ids = [pid("a"), pid("c"), pid("missing")]
    whole = corpus.records(COLL, ids)
    assert set(whole) == {pid("a"), pid("c")}  # the missing id left out
    some = corpus.records(COLL, ids, ["path", "symbol"])
    none = corpus.records(COLL, ids, [])
    for i in (pid("a"), pid("c")):
        payload, dense, terms = whole[i]
        assert some[i][0] == {"path": payload["path"], "symbol": payload["symbol"]}
        assert none[i][0] == {}
        for got in (some[i], none[i]):  # the vectors come whole whatever the payload fields
            assert np.array_equal(got[1], dense) and (got[2].indices, got[2].values) == (terms.indices, terms.values)


# -- search ---------------------------------------------------------------------------


def test_dense_ranks_by_cosine(corpus: Store) -> None:
    hits = corpus.search(COLL, branch=None, dense=unit(1), sparse=None, limit=5)
    assert labels(hits) == list("abcde")
    # the embedded store keeps float16 vectors (edge.LAYOUT): scores within its rounding
    tol = 1e-3 if corpus.kind == "embedded" else 1e-5
    assert [h.score for h in hits] == pytest.approx([1.0, 0.95, 0.8, 0.5, 0.0], abs=tol)
    assert labels(corpus.search(COLL, branch=None, dense=unit(1), sparse=None, limit=2)) == ["a", "b"]


def test_sparse_applies_idf_so_a_rare_term_outranks_a_common_one(corpus: Store) -> None:
    hits = corpus.search(COLL, branch=None, dense=None, sparse=SparseVec([7, 9], [1.0, 1.0]), limit=5)
    # c has the rare term 9; d has the common term 7 with twice the weight and still loses
    assert labels(hits)[0] == "c"
    common, rare = idf(5, 5), idf(1, 5)
    assert hits[0].score == pytest.approx(common + rare, rel=1e-4)
    assert labels(hits)[1] == "d" and hits[1].score == pytest.approx(2 * common, rel=1e-4)
    # only points sharing a term are returned
    assert labels(corpus.search(COLL, branch=None, dense=None, sparse=SparseVec([8], [1.0]), limit=5)) == ["a", "d"]


def rrf_by_hand(lists: list[list[str]], k: int = RRF_K) -> dict[str, float]:
    """score(p) = sum over lists of 1 / (k + rank), rank counted from 0 as Qdrant does."""
    scores: dict[str, float] = {}
    for ranked in lists:
        for rank, label in enumerate(ranked):
            scores[label] = scores.get(label, 0.0) + 1.0 / (k + rank)
    return scores


def test_hybrid_is_rrf_of_the_two_prefetch_lists(corpus: Store) -> None:
    dense_q, sparse_q = unit(1), SparseVec([8, 9], [1.0, 1.0])
    dense_list = labels(corpus.search(COLL, branch=None, dense=dense_q, sparse=None, limit=40))
    sparse_list = labels(corpus.search(COLL, branch=None, dense=None, sparse=sparse_q, limit=40))
    assert dense_list == list("abcde") and sparse_list == ["c", "a", "d"]
    expected = rrf_by_hand([dense_list, sparse_list])
    hits = corpus.search(COLL, branch=None, dense=dense_q, sparse=sparse_q, limit=5)
    # a: 1/60 + 1/61, c: 1/62 + 1/60, d: 1/63 + 1/62, b: 1/61, e: 1/64
    assert labels(hits) == ["a", "c", "d", "b", "e"]
    assert [h.score for h in hits] == pytest.approx([expected[x] for x in labels(hits)], rel=1e-5)


def test_hybrid_fuses_only_the_prefetched_candidates(corpus: Store) -> None:
    hits = corpus.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([8, 9], [1.0, 1.0]), limit=5, prefetch=2)
    expected = rrf_by_hand([["a", "b"], ["c", "a"]])
    assert labels(hits) == ["a", "c", "b"]
    assert [h.score for h in hits] == pytest.approx([expected[x] for x in "acb"], rel=1e-5)


def test_search_without_a_query_vector_is_a_value_error(corpus: Store) -> None:
    with pytest.raises(ValueError):
        corpus.search(COLL, branch=None, dense=None, sparse=None, limit=5)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (SearchFilter(path_prefix="src/"), ["a", "b", "e"]),  # not srcx/, not docs/src/
        (SearchFilter(path_prefix="src/click/"), ["b"]),
        (SearchFilter(path_prefix="src/a"), ["a"]),
        (SearchFilter(language="go"), ["c", "e"]),
        (SearchFilter(path_prefix="src/", language="go"), ["e"]),
        (SearchFilter(path_prefix="lib/"), []),
        (SearchFilter(), list("abcde")),
    ],
)
def test_filters_in_every_mode(corpus: Store, scope: SearchFilter, expected: list[str]) -> None:
    dense = corpus.search(COLL, branch=None, dense=unit(1), sparse=None, limit=5, scope=scope)
    assert labels(dense) == expected
    sparse = corpus.search(COLL, branch=None, dense=None, sparse=SparseVec([7], [1.0]), limit=5, scope=scope)
    assert sorted(labels(sparse)) == expected
    hybrid = corpus.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([7], [1.0]), limit=5, scope=scope)
    assert sorted(labels(hybrid)) == expected


def test_filtered_hybrid_ranks_within_the_scope(corpus: Store) -> None:
    """Out-of-scope points take no rank in the prefetch lists."""
    scope = SearchFilter(language="go")
    hits = corpus.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([9], [1.0]), limit=5, scope=scope)
    expected = rrf_by_hand([["c", "e"], ["c"]])
    assert labels(hits) == ["c", "e"]
    assert [h.score for h in hits] == pytest.approx([expected["c"], expected["e"]], rel=1e-5)


ALL_PATHS = [p.payload["path"] for p in CORPUS]


@pytest.mark.parametrize(
    ("exclude", "prefix", "expected"),
    [
        (("*.go",), "", ["a", "b", "d"]),
        (("docs/**",), "", ["a", "b", "c", "e"]),
        (("src/click/",), "", ["a", "c", "d", "e"]),  # a folder pattern leaves out what is under it
        (("*.md", "src/a.py"), "src/", ["b", "e"]),  # with a prefix: both rules hold
        (("**/*.py",), "src/", ["e"]),
        (("nothing/**",), "", list("abcde")),
    ],
)
def test_exclude_globs_leave_paths_out_in_every_mode(corpus: Store, exclude: tuple[str, ...], prefix: str,
                                                     expected: list[str]) -> None:
    scope = SearchFilter(path_prefix=prefix, exclude=exclude).resolve(ALL_PATHS)
    dense = corpus.search(COLL, dense=unit(1), sparse=None, limit=5, scope=scope, branch=None)
    assert labels(dense) == expected
    sparse = corpus.search(COLL, dense=None, sparse=SparseVec([7], [1.0]), limit=5, scope=scope, branch=None)
    assert sorted(labels(sparse)) == expected
    hybrid = corpus.search(COLL, dense=unit(1), sparse=SparseVec([7], [1.0]), limit=5, scope=scope, branch=None)
    assert sorted(labels(hybrid)) == expected


def test_exclusion_still_fills_k_from_the_rest(store: Store) -> None:
    """Excluded points take no rank: the best admitted points fill all ``k`` places even
    when every best-scoring point is excluded (a post-filter would return fewer)."""
    docs = [point(f"doc{i}", unit(1, 0.01 * i), {7: 3.0}, path=f"docs/p{i}.md", language="markdown")
            for i in range(30)]
    code = [point(f"code{i}", unit(0.2, 1, 0.01 * i), {7: 1.0}, path=f"src/m{i}.py") for i in range(12)]
    store.create_collection(COLL, DIM)
    store.upsert(COLL, docs + code)
    scope = SearchFilter(exclude=("docs/**",)).resolve(p.payload["path"] for p in docs + code)
    assert len(scope.excluded_paths) == 30
    for dense, sparse in ((unit(1), None), (None, SparseVec([7], [1.0])), (unit(1), SparseVec([7], [1.0]))):
        hits = store.search(COLL, dense=dense, sparse=sparse, limit=10, prefetch=10, scope=scope, branch=None)
        assert len(hits) == 10
        assert all(h.payload["path"].startswith("src/") for h in hits)


def test_exclude_globs_are_checked_when_the_filter_is_made() -> None:
    from gitrag.errors import ConfigError

    for bad in ("", "   ", "a\nb"):
        with pytest.raises(ConfigError):
            SearchFilter(exclude=(bad,))
    scope = SearchFilter(path_prefix="src/", exclude=("*.md", "tests/"))
    assert scope.admits("src/a.py", "python")
    assert not scope.admits("src/README.md", "markdown")
    assert not scope.admits("src/tests/test_a.py", "python")
    assert not scope.admits("lib/a.py", "python")


# -- branches: one collection, one view per branch ------------------------------------


@pytest.mark.parametrize(("branch", "expected"), [("main", list("abcd")), ("topic", ["d", "e"]), ("gone", [])])
def test_a_search_sees_only_its_branch_in_every_mode(corpus: Store, branch: str, expected: list[str]) -> None:
    dense = corpus.search(COLL, branch=branch, dense=unit(1), sparse=None, limit=5)
    assert labels(dense) == expected
    sparse = corpus.search(COLL, branch=branch, dense=None, sparse=SparseVec([7], [1.0]), limit=5)
    assert sorted(labels(sparse)) == expected
    hybrid = corpus.search(COLL, branch=branch, dense=unit(1), sparse=SparseVec([7], [1.0]), limit=5)
    assert sorted(labels(hybrid)) == expected
    assert corpus.ids(COLL, branch=branch) == {pid(x) for x in expected}
    assert corpus.count(COLL, branch=branch) == len(expected)


def test_the_branch_filter_combines_with_the_scope(corpus: Store) -> None:
    scope = SearchFilter(language="go")
    assert labels(corpus.search(COLL, branch="main", dense=unit(1), sparse=None, limit=5, scope=scope)) == ["c"]
    hits = corpus.search(COLL, branch="topic", dense=unit(1), sparse=SparseVec([9], [1.0]), limit=5, scope=scope)
    assert labels(hits) == ["e"]  # c is go and has the rare term, but is not on topic


def test_a_membership_change_is_one_payload_update(filled: Store) -> None:
    filled.set_payload_of(COLL, [pid("a"), pid("b"), pid("zz")], {"branches": ["main", "topic"]})
    assert filled.ids(COLL, branch="topic") == {pid(x) for x in "abde"}
    hit = filled.search(COLL, branch="topic", dense=unit(1), sparse=None, limit=1)[0]
    assert labels([hit]) == ["a"] and hit.payload["symbol"] == "src/a.py"  # other fields kept
    filled.set_payload_of(COLL, [pid("d")], {"branches": []})
    assert filled.ids(COLL, branch="main") == {pid(x) for x in "abc"} and filled.count(COLL) == 5


# -- both backends agree ----------------------------------------------------------------


def random_corpus(n: int, dim: int, seed: int) -> list[PointRecord]:
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((n, dim)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    records = []
    for i in range(n):
        terms = np.unique(rng.integers(0, 60, size=6))
        weights = rng.uniform(0.2, 2.0, size=len(terms))
        path = f"{['src', 'lib', 'docs'][i % 3]}/m{i % 7}/f{i}.py"
        lang = ["python", "go"][i % 2]
        records.append(PointRecord(pid(f"r{i}"), dense[i], SparseVec(terms.tolist(), weights.tolist()), payload(path, lang)))
    return records


def tie_groups(hits: list[Hit]) -> list[set[str]]:
    """Ids grouped by equal score (RRF ties are common: one rank in one list only)."""
    groups: list[tuple[float, set[str]]] = []
    for h in hits:
        if groups and math.isclose(groups[-1][0], h.score, rel_tol=1e-5):
            groups[-1][1].add(h.id)
        else:
            groups.append((h.score, {h.id}))
    return [ids for _, ids in groups]


def assert_same_ranking(edge: list[Hit], server: list[Hit]) -> None:
    """Same scores in order, same ids up to the order within ties (the last tie may be cut)."""
    assert [h.score for h in edge] == pytest.approx([h.score for h in server], rel=1e-4)
    a, b = tie_groups(edge), tie_groups(server)
    assert a[:-1] == b[:-1] and len(a[-1]) == len(b[-1])


def test_both_backends_rank_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the engines compared on float32 vectors: the shipped layout's float16 rounds scores by ~1e-4
    monkeypatch.setattr(edge_mod, "LAYOUT", edge_mod.LAYOUT._replace(datatype=None))
    corpus = random_corpus(300, 16, seed=7)
    stores = [EdgeStore(tmp_path / "edge"), ServerStore(":memory:")]
    rng = np.random.default_rng(11)
    try:
        for s in stores:
            s.create_collection(COLL, 16)
            s.upsert(COLL, corpus)
            s.flush(COLL)
        for _ in range(5):
            q = rng.standard_normal(16).astype(np.float32)
            q /= np.linalg.norm(q)
            terms = sorted(set(rng.integers(0, 60, size=4).tolist()))
            sq = SparseVec(terms, [1.0] * len(terms))
            for args in (
                {"dense": q, "sparse": None},
                {"dense": None, "sparse": sq},
                {"dense": q, "sparse": sq},
                {"dense": q, "sparse": sq, "scope": SearchFilter(path_prefix="src/", language="go")},
            ):
                edge, server = (s.search(COLL, branch=None, limit=10, **args) for s in stores)
                assert_same_ranking(edge, server)
    finally:
        for s in stores:
            s.close()


# -- embedded: disk, reopen, crash, locks -------------------------------------------------


def test_embedded_reopen_keeps_every_point(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "q")
    store.create_collection(COLL, DIM)
    store.upsert(COLL, CORPUS)
    store.delete(COLL, [pid("e")])
    store.set_payload(COLL, {pid("a"): {"symbol": "renamed"}})
    store.flush(COLL)
    before = store.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([8, 9], [1.0, 1.0]), limit=5)
    store.close()

    again = EdgeStore(tmp_path / "q")
    try:
        assert again.list_collections() == [COLL]
        assert again.ids(COLL) == {pid(x) for x in "abcd"}
        after = again.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([8, 9], [1.0, 1.0]), limit=5)
        assert after == before
        assert after[labels(after).index("a")].payload["symbol"] == "renamed"
    finally:
        again.close()


_CRASH = """
import os, sys, numpy as np
from gitrag.index.store.edge import EdgeStore
from gitrag.index.store.base import PointRecord, SparseVec
s = EdgeStore(sys.argv[1]); s.create_collection("c", 4)
s.upsert("c", [PointRecord("6d2b6c6e-0000-4000-8000-000000000001", np.array([1, 0, 0, 0], np.float32), SparseVec([1], [1.0]), {"path": "x"})])
os._exit(0)  # no flush, no close: only the write-ahead log holds the point
"""


def test_embedded_recovers_unflushed_writes_from_the_wal(tmp_path: Path) -> None:
    # a layout with the engine's WAL ("lean", the previous default)
    env = {**os.environ, "GITRAG_STORE_LAYOUT": "lean"}
    subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path / "q")], check=True, timeout=60, env=env)
    store = EdgeStore(tmp_path / "q")
    try:
        assert store.ids("c") == {"6d2b6c6e-0000-4000-8000-000000000001"}
    finally:
        store.close()


def test_embedded_without_a_wal_loses_only_unflushed_writes_and_opens(tmp_path: Path) -> None:
    # the shipped layout keeps no WAL: a write is durable once flushed (gitrag commits its
    # state only then, and its journal redoes what a crash lost); the shard still opens
    env = {k: v for k, v in os.environ.items() if k != "GITRAG_STORE_LAYOUT"}
    subprocess.run([sys.executable, "-c", _CRASH, str(tmp_path / "q")], check=True, timeout=60, env=env)
    assert not (tmp_path / "q" / "c" / "wal").exists()
    store = EdgeStore(tmp_path / "q")
    try:
        assert store.ids("c") == set()
        store.upsert("c", [PointRecord("6d2b6c6e-0000-4000-8000-000000000002", np.array([0, 1, 0, 0], np.float32),
                                       SparseVec([2], [1.0]), {"path": "y"})])
        store.flush("c")
    finally:
        store.close()
    store = EdgeStore(tmp_path / "q")
    try:
        assert store.ids("c") == {"6d2b6c6e-0000-4000-8000-000000000002"}
    finally:
        store.close()


def test_embedded_shard_open_elsewhere_is_a_clear_error(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "q")
    first.create_collection(COLL, DIM)
    second = EdgeStore(tmp_path / "q")
    try:
        with pytest.raises(StoreError, match="open in another process"):
            second.count(COLL)
    finally:
        first.close()
        second.close()


def test_embedded_size_and_drop_remove_the_files(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "q")
    store.create_collection(COLL, DIM)
    store.upsert(COLL, CORPUS)
    store.flush(COLL)
    assert store.size_bytes(COLL) > 0
    store.drop_collection(COLL)
    assert not (tmp_path / "q" / COLL).exists() and store.size_bytes(COLL) == 0
    store.close()


def test_embedded_search_while_another_thread_upserts(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "q")
    store.create_collection(COLL, DIM)
    store.upsert(COLL, CORPUS)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(40):
                store.upsert(COLL, [point(f"w{i}-{j}", unit(0, 0, 1, j), {7: 1.0}, path=f"w/{i}.py") for j in range(20)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        assert labels(store.search(COLL, branch=None, dense=unit(1), sparse=SparseVec([8], [1.0]), limit=2)) == ["a", "d"]
    thread.join()
    assert not errors and store.count(COLL) == 5 + 40 * 20
    store.close()


# -- server ---------------------------------------------------------------------------------


def test_server_local_mode_on_disk_persists(tmp_path: Path) -> None:
    url = f"path:{tmp_path / 'local'}"
    store = ServerStore(url)
    store.create_collection(COLL, DIM)
    store.upsert(COLL, CORPUS)
    assert store.size_bytes(COLL) == 0
    store.close()
    again = ServerStore(url)
    try:
        assert again.ids(COLL) == {pid(x) for x in "abcde"}
    finally:
        again.close()


def test_server_unreachable_says_what_to_check() -> None:
    store = ServerStore("http://127.0.0.1:9")  # discard port: nothing listens
    try:
        with pytest.raises(StoreError, match="cannot reach Qdrant at http://127.0.0.1:9.*GITRAG_QDRANT_URL"):
            store.list_collections()
    finally:
        store.close()


_OPEN_ELSEWHERE = """
import sys
from gitrag.errors import StoreError
from gitrag.index.store.edge import EdgeStore
try:
    EdgeStore(sys.argv[1]).count(sys.argv[2])
except StoreError as exc:
    print(exc)
"""


def test_a_refused_open_elsewhere_leaves_the_holders_shard_writable(tmp_path: Path) -> None:
    """A second process that tries the shard (a CLI command while the daemon holds it) is
    refused before the engine touches a file: the holder goes on writing and flushing."""
    holder = EdgeStore(tmp_path / "q")
    holder.create_collection(COLL, DIM)
    holder.upsert(COLL, CORPUS[:3])
    holder.flush(COLL)
    for _ in range(2):  # a second EdgeStore in this process, and another process
        with pytest.raises(StoreError, match="open in another process"):
            EdgeStore(tmp_path / "q").count(COLL)
        proc = subprocess.run([sys.executable, "-c", _OPEN_ELSEWHERE, str(tmp_path / "q"), COLL],
                              capture_output=True, text=True, timeout=60, check=True)
        assert "open in another process" in proc.stdout, proc.stdout + proc.stderr
    holder.upsert(COLL, CORPUS[3:])
    holder.flush(COLL)  # failed here: "Tracker journal ... is shorter than expected"
    holder.close()
    again = EdgeStore(tmp_path / "q")
    try:
        assert again.count(COLL) == len(CORPUS)
        with pytest.raises(StoreError, match="open in another process"):
            EdgeStore(tmp_path / "q").drop_collection(COLL)  # nor deleted under its holder
        assert again.count(COLL) == len(CORPUS)
    finally:
        again.close()
