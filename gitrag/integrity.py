"""Checks on what the store gives back: payload digests, dense vectors against the cache.

Every point gitrag writes carries ``digest`` in its payload: BLAKE2b-64 (16 hex) of the
payload's own fields (canonical JSON, without ``branches``, ``hidden`` and ``digest``,
which change without the chunk changing) bound to the point id. A point's dense vector
is derived, ``combine(chunk vector, path vector)`` (gitrag.vectors), from two rows of the
vector cache, which check themselves (gitrag.vector_cache); so the store's copy is
checked by deriving it again.

:func:`check_results` runs on the results of every query (the ten or so points that are
about to be shown, not the whole candidate lists): one ``retrieve`` of their payloads and
vectors and one cache read. A point that fails raises StoreDamaged, which the callers
(gitrag.heal) answer by rebuilding the collection from the vector cache and git. A point
written before digests existed has none: its payload is not checked, its vector is.

Cost: BENCHMARKS.md, "Integrity checks".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from gitrag.errors import StoreDamaged
from gitrag.store._common import BRANCHES, HIDDEN, damaged

DIGEST = "digest"
_UNBOUND = (BRANCHES, HIDDEN, DIGEST)
#: a stored dense vector may differ from the one derived again by the engine's own
#: normalisation and float32 rounding (~1e-7); float16 cache rows against float32 points
#: written before format 2: < 2e-4. Random bytes differ by orders of magnitude more.
VECTOR_TOLERANCE = 2e-3


def payload_digest(point_id: str, payload: dict[str, Any]) -> str:
    """16 hex: BLAKE2b-64 of ``point_id`` and ``payload`` without its membership fields."""
    fields = {k: v for k, v in payload.items() if k not in _UNBOUND}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    h = hashlib.blake2b(digest_size=8, person=b"gitrag-payload")
    h.update(point_id.encode("ascii", "replace"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def with_digest(point_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` plus its ``digest`` (what the store is given)."""
    return {**payload, DIGEST: payload_digest(point_id, payload)}


def payload_ok(point_id: str, payload: dict[str, Any]) -> bool:
    """False when the payload's ``digest`` is there and does not match it (or is not text)."""
    got = payload.get(DIGEST)
    if got is None:
        return True  # written before digests: nothing to check against
    return isinstance(got, str) and got == payload_digest(point_id, payload)


def check_results(ws: Any, collection: str, fingerprint: str, ids: Iterable[str]) -> int:
    """Check the points ``ids`` of ``collection`` (see the module doc); returns how many
    were checked. Raises StoreDamaged naming the collection when one fails."""
    from gitrag.vectors import combine, path_key

    wanted = [i for i in dict.fromkeys(ids) if i]
    records = getattr(ws.store, "records", None)
    if not wanted or records is None:
        return 0
    got = records(collection, wanted)
    where = f"collection {collection}"
    keys: dict[str, tuple[str, str]] = {}
    for pid, (payload, _vec) in got.items():
        if not payload_ok(pid, payload):
            raise damaged(where, f"the payload of point {pid} fails its digest")
        chunk, path = payload.get("chunk_hash"), payload.get("path")
        if isinstance(chunk, str) and isinstance(path, str):
            keys[pid] = (chunk, path_key(path))
    cached = ws.state.get_vectors([k for pair in keys.values() for k in pair], fingerprint)
    for pid, (chunk, pkey) in keys.items():
        vec = got[pid][1]
        if chunk not in cached or pkey not in cached:
            continue  # dropped from the cache (it heals itself on the next sync): nothing to compare with
        want = combine(cached[chunk], cached[pkey])
        if vec.shape != want.shape or not np.isfinite(vec).all() or float(np.abs(vec - want).max()) > VECTOR_TOLERANCE:
            raise damaged(where, f"the dense vector of point {pid} differs from the vector cache's")
    return len(got)




# -- gitrag doctor: the whole store and cache, or a bounded sample ------------------------------

SAMPLE_POINTS = 64  # points plain ``doctor`` checks (about 10 ms); ``--deep`` checks every one
SAMPLE_ROWS = 256  # vector cache rows plain ``doctor`` reads


def audit(ws: Any, deep: bool) -> tuple[list[str], dict[str, int]]:
    """Check the repository's collections against the manifests and the cache, and the
    cache's rows against their digests: every point and row when ``deep``, a bounded
    sample otherwise. Returns (problems, one short line each; counts checked). Failing
    cache rows are dropped (the next sync embeds them again); nothing else is changed.
    Raises StoreError when the store cannot be opened for another reason (another process)."""
    from gitrag.views import expected

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
        from gitrag.vector_cache import decode_key

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
                                "(payload digest, dense vector against the cache, or membership)")
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
        for pid, (payload, _vec) in got.items():
            if (tuple(payload.get(BRANCHES, ())), tuple(payload.get(HIDDEN, ()))) != tuple(want[pid]):
                bad += 1
    return bad


def _one_bad(ws: Any, collection: str, fingerprint: str, pid: str) -> int:
    try:
        check_results(ws, collection, fingerprint, [pid])
    except StoreDamaged:
        return 1
    return 0
