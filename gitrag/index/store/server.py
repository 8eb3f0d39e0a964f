"""The ``server`` store: a Qdrant server through qdrant-client (``GITRAG_QDRANT_URL``).

``url`` is an ``http(s)://host:port`` address. Two more forms run qdrant-client's *local
mode* in process, which stands in for a server in tests (it keeps every collection in
RAM and is slow beyond ~10^4 points; see the design doc):

- ``:memory:`` — nothing on disk;
- ``path:/some/dir`` — persisted below that folder (one process at a time).

Semantics match :class:`gitrag.index.store.edge.EdgeStore`: the same vectors, payload indexes
(keyword ``path`` with prefix matching, ``language``, ``symbol``, ``branches``, ``hidden``; a server only), the same
filters and the same RRF (k = RRF_K, rank counted from 0) so both rank alike. Updates
wait for the server to apply them, so :meth:`ServerStore.flush` has nothing left to do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from gitrag.errors import StoreError
from gitrag.index.store._common import BRANCHES, HIDDEN, KEYWORD_FIELDS, check_name, dense_list, explain, str_id
from gitrag.index.store.base import DENSE, RRF_K, SPARSE, BranchView, Hit, PointRecord, SearchFilter, SparseVec

_SCROLL_PAGE = 10_000
_UPSERT_BATCH = 512  # points per request: keeps a request well under the server's 32 MB limit


def _client(url: str, api_key: str | None, ca_cert: str | None = None,
            timeout: int | None = None) -> tuple[QdrantClient, bool]:
    """(client, is_local_mode) for ``url``. ``ca_cert``: a PEM bundle the server's TLS
    certificate is verified with (an ``https://`` URL; passed to httpx as ``verify``)."""
    if url == ":memory:":
        return QdrantClient(location=":memory:"), True
    if url.startswith("path:"):
        return QdrantClient(path=url[len("path:") :]), True
    extra: dict[str, Any] = {}
    if ca_cert:  # httpx verifies with this context (a path string there is deprecated)
        import ssl

        extra["verify"] = ssl.create_default_context(cafile=ca_cert)
    return QdrantClient(url=url, api_key=api_key, check_compatibility=False, timeout=timeout, **extra), False


def _sparse(vec: SparseVec) -> models.SparseVector:
    return models.SparseVector(indices=list(vec.indices), values=list(vec.values))


def _point(record: PointRecord) -> models.PointStruct:
    vectors: dict[str, Any] = {DENSE: dense_list(record.dense), SPARSE: _sparse(record.sparse)}
    return models.PointStruct(id=record.id, vector=vectors, payload=dict(record.payload))


def _filter(scope: SearchFilter | None) -> models.Filter | None:
    """Server filter for ``scope``; None when it restricts nothing."""
    if scope is None:
        return None
    must: list[models.Condition] = []
    if scope.path_prefix:
        must.append(models.FieldCondition(key="path", match=models.MatchPrefix(prefix=scope.path_prefix)))
    if scope.language:
        must.append(models.FieldCondition(key="language", match=models.MatchValue(value=scope.language)))
    must_not: list[models.Condition] = []
    if scope.excluded_paths:
        must_not.append(models.FieldCondition(key="path", match=models.MatchAny(any=list(scope.excluded_paths))))
    if not must and not must_not:
        return None
    return models.Filter(must=must or None, must_not=must_not or None)


def _in_branch(where: models.Filter | None, branch: BranchView | str | None) -> models.Filter | None:
    """``where`` restricted to the points ``branch`` sees (None: all; see BranchView)."""
    if branch is None:
        return where
    view = BranchView(branch) if isinstance(branch, str) else branch
    cond: models.Condition = models.FieldCondition(key=BRANCHES, match=models.MatchValue(value=view.tag))
    if view.root is not None:
        root = models.FieldCondition(key=BRANCHES, match=models.MatchValue(value=view.root))
        hidden = models.FieldCondition(key=HIDDEN, match=models.MatchValue(value=view.tag))
        cond = models.Filter(should=[cond, root], must_not=[hidden])
    return models.Filter(must=[cond] + ([where] if where is not None else []))


def _query_args(
    dense: np.ndarray | None, sparse: SparseVec | None, prefetch: int, where: models.Filter | None
) -> dict[str, Any]:
    """Keyword arguments of ``query_points`` for a dense, sparse or hybrid search."""
    if dense is not None and sparse is not None:
        prefetches = [
            models.Prefetch(query=dense_list(dense), using=DENSE, limit=prefetch, filter=where),
            models.Prefetch(query=_sparse(sparse), using=SPARSE, limit=prefetch, filter=where),
        ]
        return {"prefetch": prefetches, "query": models.RrfQuery(rrf=models.Rrf(k=RRF_K))}
    if dense is not None:
        return {"query": dense_list(dense), "using": DENSE}
    if sparse is not None:
        return {"query": _sparse(sparse), "using": SPARSE}
    raise ValueError("search needs a dense or a sparse query vector (or both)")


class ServerStore:
    """Collections on a Qdrant server (or in qdrant-client's local mode, see the module doc)."""

    kind = "server"
    exact_dense = False  # the server's HNSW search may list fewer hits than asked
    payload_fields = None  # whole payloads: a team's clients show them (gitrag.index.mirror)
    url_var = "GITRAG_QDRANT_URL"  # the settings named in its error lines (the team server's: GITRAG_TEAM_*)
    key_var = "GITRAG_QDRANT_API_KEY"

    def __init__(self, url: str, api_key: str | None = None, ca_cert: str | None = None,
                 timeout: int | None = None) -> None:
        self.url = url
        with self._translate():
            self._client, self.local = _client(url, api_key, ca_cert, timeout)
        # local mode is plain Python and not thread-safe; a server client is
        self._lock: AbstractContextManager[Any] = threading.RLock() if self.local else nullcontext()

    @contextmanager
    def _translate(self, name: str = "") -> Iterator[None]:
        """Engine/HTTP exceptions inside the block become one-line :class:`StoreError`s."""
        try:
            yield
        except StoreError:
            raise
        except UnexpectedResponse as exc:
            raise StoreError(self._http_message(exc, name)) from exc
        except ValueError as exc:  # local mode: "Collection X not found"
            if name and "not found" in str(exc):
                raise StoreError(self._missing(name)) from exc
            raise StoreError(explain(exc, self._where(name))) from exc
        except (ResponseHandlingException, ConnectionError, TimeoutError) as exc:
            raise StoreError(f"cannot reach Qdrant at {self.url}: {exc}; check {self.url_var}") from exc
        except Exception as exc:  # local mode raises ValueError/RuntimeError/KeyError
            raise StoreError(explain(exc, self._where(name))) from exc

    def _where(self, name: str) -> str:
        return f"collection {name!r} at {self.url}" if name else f"Qdrant at {self.url}"

    def _missing(self, name: str) -> str:
        return f"collection {name!r} does not exist at {self.url}: run `gitrag index`"

    def _http_message(self, exc: UnexpectedResponse, name: str) -> str:
        if name and exc.status_code == 404:
            return self._missing(name)
        if exc.status_code in (401, 403):
            return f"Qdrant at {self.url} refused the API key ({exc.status_code}); check {self.key_var}"
        detail = exc.content.decode("utf-8", "replace")[:300] if exc.content else exc.reason_phrase
        return f"{self._where(name)} answered {exc.status_code}: {detail}"

    # -- collections ---------------------------------------------------------------

    def create_collection(self, name: str, dim: int) -> None:
        """Create the collection with dense ``dim`` (cosine) and sparse (IDF) vectors.

        No-op if it exists with the same ``dim``; :class:`StoreError` if its ``dim`` differs."""
        check_name(name)
        with self._lock, self._translate(name):
            if self._client.collection_exists(name):
                self._check_dim(name, dim)
                return
            self._client.create_collection(
                name,
                vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            if not self.local:  # local mode ignores payload indexes (and warns)
                self._create_indexes(name)

    def _check_dim(self, name: str, dim: int) -> None:
        vectors = self._client.get_collection(name).config.params.vectors
        params = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if params is None:
            raise StoreError(f"collection {name!r} at {self.url} was not made by gitrag (no {DENSE!r} vector)")
        if params.size != dim:
            raise StoreError(f"collection {name!r} holds {params.size}-dim vectors, not {dim}: the embedder changed")

    def _create_indexes(self, name: str) -> None:
        for field_name in KEYWORD_FIELDS:
            schema = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, prefix=field_name == "path")
            self._client.create_payload_index(name, field_name, field_schema=schema, wait=True)

    def has_collection(self, name: str) -> bool:
        with self._lock, self._translate(name):
            return bool(self._client.collection_exists(check_name(name)))

    def outdated(self, name: str) -> bool:
        """Never: the server keeps its collections as it was configured."""
        return False

    def drop_collection(self, name: str) -> None:
        """Delete the collection; no error if it is missing."""
        with self._lock, self._translate(name):
            if self._client.collection_exists(check_name(name)):
                self._client.delete_collection(name)

    def list_collections(self) -> list[str]:
        """Every collection on the server (not only gitrag's), sorted."""
        with self._lock, self._translate():
            return sorted(c.name for c in self._client.get_collections().collections)

    # -- points --------------------------------------------------------------------

    def upsert(self, name: str, points: list[PointRecord]) -> None:
        """Insert or replace ``points`` (same id: vectors and payload replaced)."""
        with self._lock, self._translate(name):
            for start in range(0, len(points), _UPSERT_BATCH):
                batch = [_point(p) for p in points[start : start + _UPSERT_BATCH]]
                self._client.upsert(name, points=batch, wait=True)

    def delete(self, name: str, ids: list[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""
        if not ids:
            return
        with self._lock, self._translate(name):
            self._client.delete(name, points_selector=models.PointIdsList(points=list(ids)), wait=True)

    def delete_path(self, name: str, path: str) -> None:
        """Delete every point whose payload ``path`` equals ``path``."""
        where = models.Filter(must=[models.FieldCondition(key="path", match=models.MatchValue(value=path))])
        with self._lock, self._translate(name):
            self._client.delete(name, points_selector=models.FilterSelector(filter=where), wait=True)

    def set_payload(self, name: str, updates: dict[str, dict[str, Any]]) -> None:
        """Overwrite payload fields of existing points: ``{point_id: {field: value}}``.

        Fields not named keep their values; ids that do not exist are ignored. One request."""
        with self._lock, self._translate(name):
            found = self._client.retrieve(name, ids=list(updates), with_payload=False, with_vectors=False)
            existing = {str_id(r.id) for r in found}
            operations: list[models.UpdateOperation] = [
                models.SetPayloadOperation(set_payload=models.SetPayload(payload=dict(fields), points=[pid]))
                for pid, fields in updates.items()
                if fields and pid in existing
            ]
            if operations:
                self._client.batch_update_points(name, update_operations=operations, wait=True)

    def set_payload_of(self, name: str, ids: list[str], fields: dict[str, Any]) -> None:
        """Overwrite the same payload ``fields`` of many points in one request (missing ids ignored)."""
        if not ids or not fields:
            return
        with self._lock, self._translate(name):
            found = self._client.retrieve(name, ids=list(ids), with_payload=False, with_vectors=False)
            existing = sorted(str_id(r.id) for r in found)
            if existing:
                self._client.set_payload(name, payload=dict(fields), points=existing, wait=True)

    def ids(self, name: str, branch: BranchView | str | None = None) -> set[str]:
        """Every point id in the collection (scrolled in pages, no payloads or vectors); with
        ``branch``, those that branch sees."""
        where = _in_branch(None, branch)
        found: set[str] = set()
        offset: Any = None
        with self._lock, self._translate(name):
            while True:
                page, offset = self._client.scroll(
                    name, limit=_SCROLL_PAGE, offset=offset, scroll_filter=where, with_payload=False, with_vectors=False
                )
                found.update(str_id(r.id) for r in page)
                if offset is None:
                    return found

    def count(self, name: str, branch: BranchView | str | None = None) -> int:
        """Exact number of points in the collection (with ``branch``: that it sees)."""
        with self._lock, self._translate(name):
            return int(self._client.count(name, count_filter=_in_branch(None, branch), exact=True).count)

    def search(
        self,
        name: str,
        *,
        dense: np.ndarray | None,
        sparse: SparseVec | None,
        limit: int,
        branch: BranchView | str | None,
        prefetch: int = 40,
        scope: SearchFilter | None = None,
        with_payload: bool = True,
    ) -> list[Hit]:
        """Best-first hits (see :meth:`gitrag.index.store.base.Store.search`); ValueError if no vector."""
        where = _in_branch(_filter(scope), branch)
        args = _query_args(dense, sparse, prefetch, where)
        with self._lock, self._translate(name):
            result = self._client.query_points(name, limit=limit, query_filter=where, with_payload=with_payload, **args)
        return [Hit(str_id(p.id), float(p.score), dict(p.payload or {})) for p in result.points]

    def payloads(self, name: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Payloads by point id (see :meth:`gitrag.index.store.base.Store.payloads`): one ``retrieve``."""
        if not ids:
            return {}
        with self._lock, self._translate(name):
            records = self._client.retrieve(name, ids=list(ids), with_payload=True, with_vectors=False)
        return {str_id(r.id): dict(r.payload or {}) for r in records}

    def records(self, name: str, ids: list[str], fields: list[str] | None = None,
                ) -> dict[str, tuple[dict[str, Any], np.ndarray, SparseVec | None]]:
        """{point id: (payload, float32 dense vector, sparse vector)} of the points ``ids``, in one
        ``retrieve``; ``fields``: only these payload fields."""
        if not ids:
            return {}
        with self._lock, self._translate(name):
            payload: bool | list[str] = True if fields is None else (list(fields) or False)
            records = self._client.retrieve(name, ids=list(ids), with_payload=payload, with_vectors=True)
        out = {}
        for r in records:
            vectors = r.vector if isinstance(r.vector, dict) else {DENSE: r.vector or ()}
            sp = vectors.get(SPARSE)
            sparse = SparseVec(list(sp.indices), list(sp.values)) if sp is not None else None
            out[str_id(r.id)] = (dict(r.payload or {}), np.asarray(vectors.get(DENSE, ()), dtype=np.float32), sparse)
        return out

    # -- durability ----------------------------------------------------------------

    def flush(self, name: str) -> None:
        """Nothing to do: every update already waited for the server (local mode saves on write)."""

    def optimize(self, name: str) -> None:
        """Nothing to do: the server's optimizer runs in the background."""

    def size_bytes(self, name: str) -> int:
        """0: the server's disk is not ours to measure."""
        return 0

    def close(self) -> None:
        """Close the client (and release a local-mode folder)."""
        with self._lock, self._translate():
            self._client.close()
