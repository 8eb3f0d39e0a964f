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
be shown, not the whole candidate lists): one ``retrieve`` of their vectors, checked
against their signatures in one product (the signatures kept by point id in the vector
cache as the points are written, so no store payload is read per query: that read was two
thirds of the check); the digest of each payload shown that came from the store (the
unranked modes; the ranked search shows the state's manifest rows). ``gitrag doctor``
checks every payload's digest and signature in the store as well. A point
that fails raises StoreDamaged, which the callers (gitrag.index.heal) answer by rebuilding
the collection from the vector cache and git. A point written before these fields existed
is not checked.

Cost: BENCHMARKS.md, "Integrity checks".
"""

from __future__ import annotations

import hashlib
import json
import math
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


def signatures(dense: list[np.ndarray], terms: list[Any]) -> list[list[float]]:
    """:func:`signature` of many points of one dimension: the projections and norms in one
    product (float64 sums of the float32 vectors; within 1e-6 of the one-point form)."""
    if not dense:
        return []
    m = np.stack([np.asarray(v, dtype=np.float32).ravel() for v in dense]).astype(np.float64)
    dots = np.column_stack([m @ _projections(m.shape[1]).T.astype(np.float64), np.einsum("ij,ij->i", m, m)])
    out = []
    for (r1, r2, nn), t in zip(np.round(dots, 6).tolist(), terms, strict=True):
        out.append([r1, r2, nn, round(float(sum(t.values)), 6), float(sum(t.indices) % 4294967296),
                    float(len(t.indices))])
    return out


def _rescaled_near(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Rows of ``got`` ([r1, r2, |v|^2]) that match ``want`` once the vector is scaled back to
    the signed norm: a store may rescale a vector (a Qdrant server normalises every vector
    of a cosine collection, so a float16-rounded one, |v| = 1 +- 1e-4, comes back scaled),
    and a positive scale changes no cosine, so no ranking. Direction is still checked to
    ``SIG_TOLERANCE``; a zero vector never matches."""
    norm_ok = (got[:, 2] > 0) & (want[:, 2] > 0)
    scale = np.sqrt(np.where(norm_ok, want[:, 2], 1.0) / np.where(norm_ok, got[:, 2], 1.0))
    proj = got[:, :2] * scale[:, None]
    return norm_ok & (np.abs(proj - want[:, :2]) <= SIG_TOLERANCE * np.maximum(1.0, np.abs(want[:, :2]))).all(axis=1)


def payload_digest(point_id: str, payload: dict[str, Any]) -> str:
    """16 hex: BLAKE2b-64 of ``point_id`` and ``payload`` without its membership fields."""
    fields = {k: payload[k] for k in sorted(payload) if k not in _UNBOUND}
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
    h = hashlib.blake2b(digest_size=8, person=b"gitrag-payload")
    h.update(point_id.encode("ascii", "replace"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def with_digest(point_id: str, payload: dict[str, Any], dense: np.ndarray, terms: Any,
                sig: list[float] | None = None) -> dict[str, Any]:
    """``payload`` plus the signature of the point's vectors (``sig`` when made already, by
    :func:`signatures`) and its digest (what the store is given)."""
    signed = {**payload, SIGNATURE: signature(dense, terms) if sig is None else sig}
    signed[DIGEST] = payload_digest(point_id, signed)
    return signed


def payload_ok(point_id: str, payload: dict[str, Any]) -> bool:
    """False when the payload's ``digest`` is there and does not match it (or is not text)."""
    got = payload.get(DIGEST)
    if got is None:
        return True  # written before digests: nothing to check against
    return isinstance(got, str) and got == payload_digest(point_id, payload)


def signatures_ok(sigs: list[Any], dense: list[np.ndarray], terms: list[Any]) -> list[bool]:
    """Whether each point's vectors match its stored signature ``sigs[i]`` (see :func:`signature`):
    the term ids' sum and count exactly, the sparse weights' sum, the two projections and
    ``|v|^2`` to ``SIG_TOLERANCE`` (or the projections once a rescaled vector is scaled back,
    :func:`_rescaled_near`). False for a signature that is not six numbers, a missing sparse
    vector, an empty, non-1-D or non-finite dense vector. One product per dimension for all
    the projections and norms (a point's own ``signature`` in a loop cost ~25 us)."""
    ok = [isinstance(w, list) and len(w) == 6 and all(isinstance(x, (int, float)) for x in w) and t is not None
          and v.ndim == 1 and v.size > 0 for w, v, t in zip(sigs, dense, terms, strict=True)]
    by_dim: dict[int, list[int]] = {}
    for i, v in enumerate(dense):
        if ok[i]:
            by_dim.setdefault(v.shape[0], []).append(i)
    for dim, rows in by_dim.items():
        m = np.asarray(dense[rows[0]] if len(rows) == 1 else [dense[i] for i in rows], dtype=np.float32).reshape(-1, dim)
        finite = np.isfinite(m).all(axis=1)
        got = np.column_stack([m @ _projections(dim).T, np.einsum("ij,ij->i", m, m)]).astype(np.float64)
        want = np.array([sigs[i][:3] for i in rows], dtype=np.float64)
        near = (np.abs(got - want) <= SIG_TOLERANCE * np.maximum(1.0, np.abs(want))).all(axis=1) & finite
        near |= _rescaled_near(got, want) & finite
        for j, i in enumerate(rows):
            t, w = terms[i], sigs[i]
            ok[i] = bool(near[j]) and (abs(float(sum(t.values)) - w[3]) <= SIG_TOLERANCE * max(1.0, abs(w[3]))
                                       and float(sum(t.indices) % 4294967296) == w[4] and float(len(t.indices)) == w[5])
    return ok


def _sig_array(sigs: list[Any], terms: list[Any]) -> np.ndarray:
    """float64 (n, 6) of the signatures ``sigs``; NaN rows (which match nothing) for a
    signature that is not six numbers or a point without a sparse vector."""
    try:
        want = np.array(sigs)
    except (ValueError, TypeError):  # ragged
        want = np.zeros(0)
    if want.dtype.kind in "fiu" and want.shape == (len(sigs), 6) and all(t is not None for t in terms):
        return want.astype(np.float64, copy=False)
    shaped = [isinstance(w, list) and len(w) == 6 and all(isinstance(x, (int, float)) for x in w) and t is not None
              for w, t in zip(sigs, terms, strict=True)]
    return np.array([w if ok else [np.nan] * 6 for w, ok in zip(sigs, shaped, strict=True)], dtype=np.float64)


def _check_matrix(where: str, found: list[str], matrix: np.ndarray, terms: list[Any], sigs: list[Any],
                  query: Any, scores: dict[str, float] | None) -> None:
    """The per-query check of the points ``found`` (their float32 (n, dim) dense ``matrix``,
    sparse ``terms`` and expected signatures ``sigs``): the two projections and the query's
    dot product of every point in one float32 product, ``|v|^2`` in another (float32 sums of
    a few hundred products are within ~1e-6 of float64's, a hundredth of ``SIG_TOLERANCE``),
    then a few scalars a point compared in Python (for ten points cheaper than a dozen array
    operations); a point that fails them is judged again by :func:`_check_rows` (a vector the
    store scaled passes there). StoreDamaged naming the first that fails."""
    n = len(found)
    if not n:
        return
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] == 0 or m.shape[0] != n:
        raise damaged(where, f"the vectors of point {found[0]} fail their signature")
    dim = m.shape[1]
    q = None if query is None or not scores else np.asarray(query, dtype=np.float32).ravel()
    if q is not None and q.size != dim:
        q = None
    # one product for all of it: (n, 2 or 3 + n): r1 . v, r2 . v (and q . v), then the Gram matrix,
    # whose diagonal is |v|^2 (one BLAS call where an einsum and a second conversion cost more for ten points)
    head = 2 if q is None else 3
    both = m @ np.concatenate([_projections(dim)] + ([] if q is None else [q[None, :]]) + [m]).T
    prods, norms = both[:, :head], both.diagonal(head)
    rows, nns, tol = prods.tolist(), norms.tolist(), SIG_TOLERANCE
    for p, nn, w, t in zip(rows, nns, sigs, terms, strict=True):
        try:  # |a - b| <= tol * max(1, |b|), its first case (|a - b| <= tol) tried alone first: no max() call
            ok = (isinstance(w, list) and len(w) == 6 and t is not None
                  and ((d := abs(p[0] - w[0])) <= tol or d <= tol * abs(w[0]))
                  and ((d := abs(p[1] - w[1])) <= tol or d <= tol * abs(w[1]))
                  and ((d := abs(nn - w[2])) <= tol or d <= tol * abs(w[2]))
                  and ((d := abs(sum(t.values) - w[3])) <= tol or d <= tol * abs(w[3]))
                  and sum(t.indices) % 4294967296 == w[4] and len(t.indices) == w[5])
        except TypeError:  # a signature of something else than numbers
            ok = False
        if not ok:  # NaN fails every comparison above
            _check_rows(where, found, m, prods, norms, terms, sigs)
            break
    if q is None:
        return
    scored = scores or {}
    qn = math.sqrt(float(q @ q)) or 1.0
    for pid, p, nn in zip(found, rows, nns, strict=True):
        score = scored.get(pid)
        if score is not None and abs((cosine := p[2] / ((math.sqrt(nn) * qn) or 1.0)) - score) > SCORE_TOLERANCE:
            raise damaged(where, f"point {pid} was scored {score:.4f} for a vector whose score is "
                                 f"{cosine:.4f}: the engine's id map is wrong")


def _check_rows(where: str, found: list[str], m: np.ndarray, prods: np.ndarray, norms: np.ndarray,
                terms: list[Any], sigs: list[Any]) -> None:
    """:func:`_check_matrix`'s verdict on points one of which failed the direct comparison, in
    arrays: the six numbers of every point against its signature, or the projections once a
    rescaled vector is scaled back (:func:`_rescaled_near`), the vector finite. StoreDamaged
    naming the first point that fails both."""
    n = len(found)
    want = _sig_array(sigs, terms)
    got = np.empty((n, 6), dtype=np.float64)
    got[:, :2] = prods[:, :2]
    got[:, 2] = norms
    got[:, 3:] = np.array([x for t in terms for x in ((sum(t.values), sum(t.indices) % 4294967296, len(t.indices))
                                                       if t is not None else (np.nan,) * 3)],
                          dtype=np.float64).reshape(n, 3)
    tol = SIG_TOLERANCE * np.maximum(1.0, np.abs(want))
    tol[:, 4:] = 0.0  # the term ids' sum and count: exact
    near = (np.abs(got - want) <= tol).all(axis=1)  # NaN (a non-finite vector, a malformed signature): False
    sparse_ok = (np.abs(got[:, 3:] - want[:, 3:]) <= tol[:, 3:]).all(axis=1)
    near = (near | (_rescaled_near(got[:, :3], want[:, :3]) & sparse_ok)) & np.isfinite(m).all(axis=1)
    if not near.all():
        raise damaged(where, f"the vectors of point {found[int(np.argmin(near))]} fail their signature")


def check_results(ws: Any, collection: str, fingerprint: str, ids: Iterable[str], query: Any = None,
                  scores: dict[str, float] | None = None, served: dict[str, dict[str, Any]] | None = None,
                  payloads: bool = False) -> int:
    """Check the points ``ids`` of ``collection`` (see the module doc); returns how many
    were checked. Raises StoreDamaged naming the collection when one fails.

    Per query (the default): one ``retrieve`` of the points' vectors, checked against
    their ``vsig``, all in one product. The signature comes from the payload shown when
    the store gave it (``served``: {id: the store payload a search returned}, the unranked
    modes; its digest is checked first), else from the vector cache's ``signatures`` rows
    (by point id, digest-checked; gitrag.index.vector_cache), else from the store's payload
    (its ``vsig`` and ``digest`` fields only; a point with a digest and no signature fails).
    The ranked search shows payloads from the state's manifest, not the store's, so per
    query no store payload is read when the cache has the signatures (that read was two
    thirds of the check's time). With ``payloads`` (``gitrag doctor``), every point's whole
    payload is read from the store and its digest and signature checked.

    With the dense ``query`` and the engine's cosine ``scores`` ({id: score}), each
    checked point's score is computed again from its vector: an engine that scored one
    vector and returned another point's id (a lost id map) is caught too.
    ``fingerprint``: the embedder's."""
    wanted = [i for i in dict.fromkeys(ids) if i]
    records = getattr(ws.store, "records", None)
    if not wanted or records is None:
        return 0
    where = f"collection {collection}"
    served = served or {}
    for pid in wanted:
        if pid in served and not payload_ok(pid, served[pid]):
            raise damaged(where, f"the payload of point {pid} fails its digest")
    known: dict[str, list[float]] = {}
    cache = getattr(getattr(ws, "state", None), "cache", None)
    if not payloads and cache is not None and hasattr(cache, "get_signatures"):
        known = cache.get_signatures([i for i in wanted if i not in served])
    fast = getattr(ws.store, "vectors", None)
    if not payloads and fast is not None and all(
            i in known if i not in served else served[i].get(SIGNATURE) is not None for i in wanted):
        try:
            found, matrix, terms = fast(collection, wanted)
        except ValueError:  # dense vectors of different lengths: the slow path below says which point
            found = None
        if found is not None:
            sigs = [served[p].get(SIGNATURE) if p in served else known.get(p) for p in found]
            _check_matrix(where, found, matrix, terms, sigs, query, scores)
            return len(found)
    if payloads:
        got = records(collection, wanted)
    else:  # the store's signature fields only for points neither shown from the store nor in the cache
        got = records(collection, wanted, [] if all(i in served or i in known for i in wanted) else [SIGNATURE, DIGEST])
    signed: list[tuple[str, Any, np.ndarray, Any]] = []
    scored: list[tuple[str, np.ndarray]] = []
    for pid, (payload, vec, terms) in got.items():
        if payloads and not payload_ok(pid, payload):
            raise damaged(where, f"the payload of point {pid} fails its digest")
        if payloads:
            sig = payload.get(SIGNATURE)
        else:
            sig = served[pid].get(SIGNATURE) if pid in served else known.get(pid, payload.get(SIGNATURE))
        if sig is not None:
            signed.append((pid, sig, vec, terms))
        elif DIGEST in payload or (pid in served and DIGEST in served[pid]):
            raise damaged(where, f"the payload of point {pid} lost its vector signature")
        if query is not None and scores and pid in scores and vec.size == np.size(query):
            scored.append((pid, vec))
    if signed:
        verdicts = signatures_ok([s for _, s, _, _ in signed], [v for _, _, v, _ in signed], [t for *_, t in signed])
        bad = next((pid for (pid, *_), ok in zip(signed, verdicts, strict=True) if not ok), None)
        if bad is not None:
            raise damaged(where, f"the vectors of point {bad} fail their signature")
    if scored:  # the engine's cosines computed again, all in one product
        q = np.asarray(query, dtype=np.float64).ravel()
        m = np.asarray([v for _, v in scored], dtype=np.float64)
        norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        cosines = (m @ q) / np.where(norms == 0, 1.0, norms)
        for (pid, _), cosine in zip(scored, cosines.tolist(), strict=True):
            if abs(cosine - scores[pid]) > SCORE_TOLERANCE:
                raise damaged(where, f"point {pid} was scored {scores[pid]:.4f} for a vector whose score is "
                                     f"{cosine:.4f}: the engine's id map is wrong")
    return len(got)


_MANIFEST_COUNTS: dict[tuple[str, str, str | None, float | None], int] = {}


def check_count(ws: Any, branch: Any) -> int | None:
    """StoreDamaged when the store shows ``branch`` another number of points than its
    manifest holds (a query whose dense list came back short runs this, :func:`check_list`:
    lost points leave no other trace in an answer). Returns that number (None: a sync is
    writing, nothing checked)."""
    if ws.state.journal():  # a sync is writing (or crashed writing) the store: counts may differ until it commits
        return None
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
    return want


def check_known(ws: Any, branch: Any, unknown: list[str]) -> None:
    """StoreDamaged when the store listed points (``unknown``, ids) that no manifest row holds
    and no sync is writing: a damaged id mapping gives a point another id, which answers for
    nothing and leaves a wrong list without a word (a sync between the store's list and the
    manifest read is the one innocent cause: the journal says so)."""
    if unknown and not ws.state.journal():
        raise damaged(f"collection {branch.collection}",
                      f"it lists {len(unknown)} point(s) no manifest row of branch {branch.name!r} holds "
                      f"(e.g. {unknown[0]}): a damaged id mapping")


def check_list(ws: Any, branch: Any, listed: int, asked: int, scoped: bool = False) -> None:
    """A query's dense list, as the store returned it, has ``listed`` hits of the ``asked``
    (fewer: the branch holds fewer points, or some are lost, or the engine could not score
    them). StoreDamaged when the store's count of the branch differs from its manifest's
    (:func:`check_count`), or, for a query without a scope (``scoped``: a path or language
    filter, whose own count is not known), when an exact scan (``ws.store.exact_dense``)
    lists fewer points than the branch holds, or any search lists none: a point missing
    from an exact scan is lost or has vectors the engine cannot score (random bytes over a vector file make NaN cosines,
    which the engine leaves out: the list came back empty and nothing was shown to check)."""
    want = check_count(ws, branch)
    # an exact scan lists every point it can score: a shorter list is lost or unscorable points (a
    # damaged id mapping, NaN vectors). An approximate (HNSW, server) search may list fewer without
    # any damage, and a heal is too dear to risk on that: there only an empty list counts
    short = listed < min(asked, want or 0) if ws.store.exact_dense else listed == 0
    if want and not scoped and short:
        raise damaged(f"collection {branch.collection}",
                      f"its dense list for branch {branch.name!r} has {listed} points of the {min(asked, want)} "
                      "it holds: vectors it cannot score")


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
        check = ws.state.db.execute("PRAGMA integrity_check(1)").fetchone()  # indexes too (quick_check skips them)
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
            check_results(ws, collection, fingerprint, part, payloads=True)
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
        check_results(ws, collection, fingerprint, [pid], payloads=True)
    except StoreDamaged:
        return 1
    return 0
