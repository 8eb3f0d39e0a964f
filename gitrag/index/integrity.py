"""Checks on what the store gives back: payload digests and vector signatures.

Every point gitrag writes carries two payload fields of its own:

- ``vsig``: the signature of its vectors, ``[r1 . dense, r2 . dense, dense . dense,
  sum of the sparse weights, sum of the term ids mod 2**32, number of terms]`` with r1,
  r2 two fixed pseudo-random unit vectors (seeded by the dimension). The vectors
  are derived from rows of the vector cache that check themselves (gitrag.index.vector_cache);
  the signature is made from them as they are written. Random bytes over a vector move
  the dot products by orders of magnitude more than ``SIG_TOLERANCE``; the engine's own
  renormalisation of a cosine vector moves them by ~1e-7.
- ``digest``: BLAKE2b-64 (16 hex) of the point id and the payload's fields (canonical
  JSON, without ``branches``, ``hidden`` and ``digest``, which change without the chunk
  changing), ``vsig`` included.

:func:`check_results` runs on the results of every query (the ten or so points about to
be shown, not the whole candidate lists): one ``retrieve`` of their payloads and vectors,
a digest, three dot products and three sums each; no cache read. A point that fails raises
StoreDamaged, which the callers (gitrag.index.heal) answer by rebuilding the collection from the
vector cache and git. A point written before these fields existed is not checked.

Cost: BENCHMARKS.md, "Integrity checks".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import numpy as np

from gitrag.errors import StoreDamaged
from gitrag.index.store import BRANCHES, HIDDEN, damaged

DIGEST = "digest"
SIGNATURE = "vsig"
_UNBOUND = (BRANCHES, HIDDEN, DIGEST)
SIG_TOLERANCE = 1e-4
SCORE_TOLERANCE = 1e-3  # the engine's float32 cosine against ours in float64


@lru_cache(maxsize=8)
def _projections(dim: int) -> np.ndarray:
    """float32 (2, dim): two fixed pseudo-random unit vectors (seeded by ``dim``)."""
    r = np.random.default_rng(dim).standard_normal((2, dim))
    return (r / np.linalg.norm(r, axis=1, keepdims=True)).astype(np.float32)


def signature(dense: np.ndarray, terms: Any) -> list[float]:
    """``vsig`` of a point's dense vector and sparse vector (see the module doc)."""
    v = np.asarray(dense, dtype=np.float32).ravel()
    r1, r2 = (_projections(v.shape[0]) @ v).tolist()
    return [round(r1, 6), round(r2, 6), round(float(v @ v), 6), round(float(sum(terms.values)), 6),
            float(sum(terms.indices) % 4294967296), float(len(terms.indices))]


def _signature_ok(want: Any, dense: np.ndarray, terms: Any) -> bool:
    if not isinstance(want, list) or len(want) != 6 or not all(isinstance(x, (int, float)) for x in want):
        return False
    if terms is None or dense.size == 0 or not np.isfinite(dense).all():
        return False
    got = signature(dense, terms)
    if got[4:] != want[4:]:  # the term ids' sum and their number: exact
        return False
    return all(abs(a - b) <= SIG_TOLERANCE * max(1.0, abs(b)) for a, b in zip(got[:4], want[:4], strict=True))


def payload_digest(point_id: str, payload: dict[str, Any]) -> str:
    """16 hex: BLAKE2b-64 of ``point_id`` and ``payload`` without its membership fields."""
    fields = {k: payload[k] for k in sorted(payload) if k not in _UNBOUND}
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
    h = hashlib.blake2b(digest_size=8, person=b"gitrag-payload")
    h.update(point_id.encode("ascii", "replace"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def with_digest(point_id: str, payload: dict[str, Any], dense: np.ndarray, terms: Any) -> dict[str, Any]:
    """``payload`` plus the signature of the point's vectors and its digest (what the store is given)."""
    signed = {**payload, SIGNATURE: signature(dense, terms)}
    signed[DIGEST] = payload_digest(point_id, signed)
    return signed


def payload_ok(point_id: str, payload: dict[str, Any]) -> bool:
    """False when the payload's ``digest`` is there and does not match it (or is not text)."""
    got = payload.get(DIGEST)
    if got is None:
        return True  # written before digests: nothing to check against
    return isinstance(got, str) and got == payload_digest(point_id, payload)


def check_results(ws: Any, collection: str, fingerprint: str, ids: Iterable[str], query: Any = None,
                  scores: dict[str, float] | None = None) -> int:
    """Check the points ``ids`` of ``collection`` (see the module doc); returns how many
    were checked. With the dense ``query`` and the engine's cosine ``scores`` ({id: score}),
    each checked point's score is computed again from its vector: an engine that scored
    one vector and returned another point's id (a lost id map) is caught too. Raises
    StoreDamaged naming the collection when one fails. ``fingerprint``: the embedder's."""
    wanted = [i for i in dict.fromkeys(ids) if i]
    records = getattr(ws.store, "records", None)
    if not wanted or records is None:
        return 0
    got = records(collection, wanted)
    where = f"collection {collection}"
    scored: list[tuple[str, np.ndarray]] = []
    for pid, (payload, vec, terms) in got.items():
        if not payload_ok(pid, payload):
            raise damaged(where, f"the payload of point {pid} fails its digest")
        if SIGNATURE in payload and not _signature_ok(payload[SIGNATURE], vec, terms):
            raise damaged(where, f"the vectors of point {pid} fail their signature")
        if query is not None and scores and pid in scores and vec.size == np.size(query):
            scored.append((pid, vec))
    if scored:  # the engine's cosines computed again, all in one product
        q = np.asarray(query, dtype=np.float64).ravel()
        m = np.stack([v for _, v in scored]).astype(np.float64)
        norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        cosines = (m @ q) / np.where(norms == 0, 1.0, norms)
        for (pid, _), cosine in zip(scored, cosines.tolist(), strict=True):
            if abs(cosine - scores[pid]) > SCORE_TOLERANCE:
                raise damaged(where, f"point {pid} was scored {scores[pid]:.4f} for a vector whose score is "
                                     f"{cosine:.4f}: the engine's id map is wrong")
    return len(got)


_MANIFEST_COUNTS: dict[tuple[str, str, str | None, float | None], int] = {}


def check_count(ws: Any, branch: Any) -> None:
    """StoreDamaged when the store shows ``branch`` another number of points than its
    manifest holds (a query that found fewer results than it asked for runs this: lost
    points leave no other trace in an answer)."""
    if ws.state.journal():  # a sync is writing (or crashed writing) the store: counts may differ until it commits
        return
    key = (str(ws.state.path), branch.name, branch.indexed_commit, branch.updated_at)
    want = _MANIFEST_COUNTS.get(key)
    if want is None:  # a join over the manifest: once per branch state, not per query
        want = _MANIFEST_COUNTS[key] = ws.state.point_count(branch.name)
        if len(_MANIFEST_COUNTS) > 256:
            _MANIFEST_COUNTS.clear()
    have = ws.store.count(branch.collection, branch=branch.view)
    if have != want:
        raise damaged(f"collection {branch.collection}",
                      f"it shows branch {branch.name!r} {have} points, its manifest holds {want}")


# -- gitrag doctor: the whole store and cache, or a bounded sample ------------------------------

SAMPLE_POINTS = 64  # points plain ``doctor`` checks (about 10 ms); ``--deep`` checks every one
SAMPLE_ROWS = 256  # vector cache rows plain ``doctor`` reads


def audit(ws: Any, deep: bool) -> tuple[list[str], dict[str, int]]:
    """Check the repository's collections against the manifests and the cache, and the
    cache's rows against their digests: every point and row when ``deep``, a bounded
    sample otherwise. Returns (problems, one short line each; counts checked). Failing
    cache rows are dropped (the next sync embeds them again); nothing else is changed.
    Raises StoreError when the store cannot be opened for another reason (another process)."""
    from gitrag.index.views import expected

    problems: list[str] = []
    counts = {"points": 0, "rows": 0}
    cache = ws.state.cache
    if deep:
        result = cache.verify()
        counts["rows"] = result["vectors"] + result["sparse"]
        if result["damaged"]:
            problems.append(f"the vector cache {cache.path} was damaged: moved aside and started again "
                            "(chunks are embedded again by the next `gitrag index`)")
        elif result["bad"]:
            problems.append(f"{result['bad']} vector cache rows failed their digests: dropped "
                            "(embedded again by the next `gitrag index`)")
        check = ws.state.db.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            problems.append(f"{ws.state.path} fails SQLite's check ({check[0] if check else '?'})")
    else:
        before = cache.dropped
        rows = cache.db.execute("SELECT key FROM vectors ORDER BY id DESC LIMIT ?", (SAMPLE_ROWS,)).fetchall()
        fps = [r[0] for r in cache.db.execute("SELECT name FROM fingerprints")]
        from gitrag.index.vector_cache import decode_key

        for fp in fps:
            cache.get_vectors([decode_key(r[0]) for r in rows], fp)
        counts["rows"] = len(rows)
        if cache.dropped > before:
            problems.append(f"{cache.dropped - before} vector cache rows failed their digests: dropped "
                            "(embedded again by the next `gitrag index`)")
    by_fp = {b.fingerprint: b.collection for b in ws.state.branches() if b.materialized}
    for fingerprint, collection in sorted(by_fp.items()):
        try:
            if not ws.store.has_collection(collection):
                problems.append(f"collection {collection} is missing")
                continue
            want = expected(ws, fingerprint)
            have = ws.store.ids(collection)
            ids = sorted(want) if deep else sorted(want)[:: max(1, len(want) // SAMPLE_POINTS)][:SAMPLE_POINTS]
            if deep:
                if have != set(want):
                    problems.append(f"collection {collection} holds {len(have - set(want))} points no branch "
                                    f"holds and lacks {len(set(want) - have)} of the manifests'")
                bad = _bad_points(ws, collection, fingerprint, ids, want)
            else:
                if len(have) != len(want):
                    problems.append(f"collection {collection} holds {len(have)} points, the manifests {len(want)}")
                bad = _bad_points(ws, collection, fingerprint, ids, want)
            counts["points"] += len(ids)
            if bad:
                problems.append(f"collection {collection}: {bad} of {len(ids)} points checked fail "
                                "(payload digest, vector signature, or membership)")
        except StoreDamaged as exc:
            problems.append(str(exc).split(": it is rebuilt")[0])
    return problems, counts


def _bad_points(ws: Any, collection: str, fingerprint: str, ids: list[str], want: dict[str, Any]) -> int:
    """How many of ``ids`` fail :func:`check_results` or carry another membership."""
    bad = 0
    for i in range(0, len(ids), 256):
        part = ids[i : i + 256]
        try:
            check_results(ws, collection, fingerprint, part)
        except StoreDamaged:
            bad += sum(_one_bad(ws, collection, fingerprint, pid) for pid in part)
            continue
        got = ws.store.records(collection, part) if hasattr(ws.store, "records") else {}
        for pid, (payload, _vec, _terms) in got.items():
            if (tuple(payload.get(BRANCHES, ())), tuple(payload.get(HIDDEN, ()))) != tuple(want[pid]):
                bad += 1
    return bad


def _one_bad(ws: Any, collection: str, fingerprint: str, pid: str) -> int:
    try:
        check_results(ws, collection, fingerprint, [pid])
    except StoreDamaged:
        return 1
    return 0
