"""The per-query result check (gitrag.index.integrity.check_results), on a real index.

The check reads, per query, only the shown points' vectors from the store, checks them
against their signatures (kept by point id in the vector cache) in one product, and checks
the digests of the payloads shown from the store (the unranked modes); the ranked search
shows the state's rows.
These tests hold the batched signature check to the per-point one it replaced, and show
that a store payload gone bad is never shown: the ranked search shows the state's copy,
the unranked one and ``doctor`` find the digest failing, and the answers come back.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from gitrag.errors import StoreDamaged
from gitrag.index.integrity import DIGEST, SIGNATURE, _check_matrix, check_results, signatures, signatures_ok
from gitrag.index.store import SparseVec
from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo
from tests.reliability import commit_a, lost_wrong, run, sync


def _records(path: Path) -> tuple[object, str, dict]:
    ws = open_workspace(path)
    branch = ws.state.branch(ws.repo.branch())
    ids = sorted(ws.store.ids(branch.collection))
    return ws, branch.collection, ws.store.records(branch.collection, ids)


def test_the_signature_check_fails_exactly_the_damaged_points(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    ws, _coll, got = _records(repo.path)
    try:
        pids = sorted(got)
        assert len(pids) >= 8
        sigs = [got[p][0][SIGNATURE] for p in pids]
        dense = [got[p][1] for p in pids]
        terms = [got[p][2] for p in pids]
        assert signatures_ok(sigs, dense, terms) == [True] * len(pids)
        # damage one part of six points: the check must fail exactly those
        dense[0] = dense[0].copy()
        dense[0][3] += 0.01  # one component moved
        dense[1] = np.full_like(dense[1], np.nan)  # NaN bytes
        dense[2] = dense[2][:-1]  # a vector one float short
        terms[3] = SparseVec(terms[3].indices, [v * 1.01 for v in terms[3].values])  # sparse weights changed
        terms[4] = SparseVec(terms[4].indices[:-1], terms[4].values[:-1])  # one term lost
        sigs[5] = sigs[5][:5]  # a signature cut short
        want = [False] * 6 + [True] * (len(pids) - 6)
        assert signatures_ok(sigs, dense, terms) == want
    finally:
        ws.close()


def _asked(path: Path, mode: str) -> list[tuple[str, int, float]]:
    proc = run("ask", "gamma value", "--json", "--no-answer", "--mode", mode, "--repo", str(path))
    assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
    return [(r["path"], r["start_line"], round(r["score"], 3)) for r in json.loads(proc.stdout)["results"]]


@pytest.mark.parametrize("field", ["start_line", SIGNATURE])
def test_a_store_payload_gone_bad_is_never_shown(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 field: str) -> None:
    """A field of every store payload changed behind the digest's back (``start_line``: a
    field shown; ``vsig``: what the per-query check reads)."""
    commit_a(repo)
    sync(repo.path)
    before = {mode: _asked(repo.path, mode) for mode in ("hybrid", "dense")}
    ws, coll, got = _records(repo.path)
    try:
        bad = {pid: {field: 999 if field == "start_line" else [0.0] * 6} for pid in got}
        ws.store.set_payload(coll, bad)
        ws.store.flush(coll)
        with pytest.raises(StoreDamaged, match="fails its digest"):  # the check doctor runs reads whole payloads
            check_results(ws, coll, "", sorted(got)[:3], payloads=True)
        # the per-query check takes the signatures the vector cache keeps by point id: nothing shown is wrong
        assert check_results(ws, coll, "", sorted(got)[:3]) == 3
        if field == SIGNATURE:  # without them (a cache from before they were kept) it reads the store's: they fail
            ws.state.cache.db.execute("DELETE FROM signatures")
            # this process checked those rows once and keeps their values; a new process reads the store's
            assert check_results(ws, coll, "", sorted(got)[:3]) == 3
            ws.close()
            ws = open_workspace(repo.path)
            with pytest.raises(StoreDamaged, match="fail their signature"):
                check_results(ws, coll, "", sorted(got)[:3])
    finally:
        ws.close()
    proc = run("doctor", "--repo", str(repo.path))
    line = next(row for row in proc.stdout.splitlines() if " integrity " in f" {row} ")
    assert proc.returncode == 1 and line.startswith("FAIL integrity") and "gitrag index --rebuild" in line, line
    # the ranked search shows the state's rows; the dense one shows the store's, finds them failing and rebuilds
    assert _asked(repo.path, "hybrid") == before["hybrid"]
    assert _asked(repo.path, "dense") == before["dense"]
    assert lost_wrong(repo.path, tmp_path, monkeypatch) == (0, 0)


def test_a_payload_that_lost_its_signature_but_kept_its_digest_fails(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    ws, coll, got = _records(repo.path)
    try:
        pid = sorted(got)[0]
        assert DIGEST in got[pid][0]
        ws.store.set_payload(coll, {pid: {SIGNATURE: None}})  # read back as no signature at all
        ws.state.cache.db.execute("DELETE FROM signatures")  # so the check reads the store's
        with pytest.raises(StoreDamaged, match="lost its vector signature"):
            check_results(ws, coll, "", [pid])
    finally:
        ws.close()


def test_the_cache_keeps_each_points_signature_and_drops_a_bad_row(repo: Repo) -> None:
    commit_a(repo)
    sync(repo.path)
    ws, coll, got = _records(repo.path)
    try:
        cache = ws.state.cache
        kept = cache.get_signatures(sorted(got))
        assert kept == {pid: payload[SIGNATURE] for pid, (payload, _v, _t) in got.items()}  # every point, as stored
        before = cache.dropped
        cache.db.execute("UPDATE signatures SET sig = zeroblob(48) WHERE point = (SELECT point FROM signatures "
                         "ORDER BY point LIMIT 1)")  # a row gone bad
        assert cache.get_signatures(sorted(got)) == kept  # this process checked them once: their values, from memory
        ws.close()
        ws, coll, got = _records(repo.path)  # a new process reads the rows again
        cache = ws.state.cache
        before = cache.dropped
        again = cache.get_signatures(sorted(got))
        assert len(again) == len(got) - 1 and cache.dropped == before + 1
        assert cache.get_signatures(sorted(got)) == again  # dropped, not read again
        # the point whose row went is checked against the store's signature instead
        missing = next(p for p in got if p not in again)
        assert check_results(ws, coll, "", [missing]) == 1
        ws.store.set_payload(coll, {missing: {SIGNATURE: [0.0] * 6}})
        with pytest.raises(StoreDamaged, match="fail their signature"):
            check_results(ws, coll, "", [missing])
        # a row of another point's signature under this point's id fails its digest (bound to the point id)
        victim, other = sorted(again)[:2]
        cache.db.execute("UPDATE signatures SET sig = (SELECT sig FROM signatures WHERE point = ?) WHERE point = ?",
                         (uuid.UUID(other).bytes, uuid.UUID(victim).bytes))
        ws.close()
        ws, coll, got = _records(repo.path)
        cache = ws.state.cache
        assert victim not in cache.get_signatures([victim, other]) and other in cache.get_signatures([other])
    finally:
        ws.close()


def test_a_vector_the_store_rescaled_passes_and_one_turned_or_zeroed_fails() -> None:
    """A Qdrant server normalises every vector of a cosine collection on upsert, so a
    float16-rounded vector (|v| = 1 +- 1e-4) comes back scaled: the same direction, the same
    cosines. Its signature must pass (else every team reader calls the server damaged);
    a vector turned by a little more than the tolerance, or zeroed, must not."""
    from gitrag.index.integrity import signature

    rng = np.random.default_rng(5)
    v = rng.normal(size=256).astype(np.float32)
    v = (v / np.linalg.norm(v)).astype(np.float16).astype(np.float32)  # what the embedded store keeps
    terms = SparseVec(indices=[3, 17], values=[0.5, 0.25])
    want = signature(v, terms)
    served = (v / np.linalg.norm(v)).astype(np.float32)  # what the server gives back
    assert not np.array_equal(served, v)
    turned = v.copy()
    turned[:8] = -turned[:8]
    cases = [v, served, 3.0 * v, turned, np.zeros_like(v)]
    assert signatures_ok([want] * len(cases), cases, [terms] * len(cases)) == [True, True, True, False, False]


def test_the_per_query_check_fails_exactly_the_damaged_point_and_passes_a_rescaled_one(repo: Repo) -> None:
    """The per-query form (the store's ``vectors()`` read, compared as scalars, judged again in
    arrays when one fails) on a real index: the untouched points pass with the engine's own
    cosines; each damage of one point (a component moved, NaN, a vector short, sparse weights
    a term lost or its id changed, a signature cut short or not numbers, another point's score) raises
    StoreDamaged naming that point; the same vector scaled by the store passes."""
    commit_a(repo)
    sync(repo.path)
    ws, coll, got = _records(repo.path)
    try:
        wanted = sorted(got)
        found, matrix, terms = ws.store.vectors(coll, wanted)
        assert sorted(found) == wanted and matrix.dtype == np.float32 and matrix.shape[0] == len(found)
        sigs = [ws.state.cache.get_signatures(found)[p] for p in found]
        query = matrix[0] / np.linalg.norm(matrix[0])
        scores = {p: float(v @ query / np.linalg.norm(v)) for p, v in zip(found, matrix, strict=True)}
        _check_matrix("here", found, matrix, terms, sigs, query, scores)  # as written: all pass
        # the signatures of exactly these vectors: every point passes the direct comparison, so each
        # damage below is caught by it (not only by the array form a rescaled vector needs)
        sigs = signatures(list(matrix), terms)
        _check_matrix("here", found, matrix, terms, sigs, query, scores)
        scaled = matrix.copy()
        scaled[2] *= 1.0001  # what a server that normalises would give back: same direction, same cosines
        _check_matrix("here", found, scaled, terms, sigs, query, scores)

        keep = object()

        def damaged(i: int, m=None, t=keep, s=None, sc=None) -> str:
            mm, tt, ss = (matrix if m is None else m), list(terms), list(sigs)
            if t is not keep:
                tt[i] = t
            if s is not None:
                ss[i] = s
            with pytest.raises(StoreDamaged) as err:
                _check_matrix("here", found, mm, tt, ss, query, scores if sc is None else sc)
            return str(err.value)

        i = 3
        moved = matrix.copy()
        moved[i, 5] += 0.01
        nan = matrix.copy()
        nan[i] = np.nan
        t = terms[i]
        cases = [damaged(i, m=moved), damaged(i, m=nan),
                 damaged(i, t=SparseVec(t.indices, [v * 1.01 for v in t.values])),
                 damaged(i, t=SparseVec(t.indices[:-1], t.values[:-1])), damaged(i, t=None),
                 damaged(i, t=SparseVec([*t.indices[:-1], t.indices[-1] + 1], t.values)),  # a term id changed
                 damaged(i, s=sigs[i][:5]), damaged(i, s=[str(x) for x in sigs[i]]),
                 damaged(i, sc={**scores, found[i]: scores[found[i]] + 0.01})]
        assert all(found[i] in c for c in cases), cases
        with pytest.raises(StoreDamaged, match="fail their signature"):
            _check_matrix("here", found, matrix[:, :-1], terms, sigs, None, None)  # vectors a float short
    finally:
        ws.close()
