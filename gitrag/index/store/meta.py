"""A companion collection of small records beside a team's points collection on a server.

A team's shared index (docs/team.md) keeps, next to its points collection ``<name>``, a
collection ``<name>_meta`` of payload-only records: the writer's lease, each published
branch's record and manifest parts, the symbol graphs per blob, the journal of a publish
under way. Every record is a point with a one-dimensional placeholder vector (Qdrant needs
one) and a payload whose ``kind`` says what it is; ids are UUIDs derived from the record's
key (:func:`record_id`), so a record is rewritten in place. Through qdrant-client, on a
server or in its local mode.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

from qdrant_client import models

from gitrag.index.store.server import ServerStore

_NS = uuid.UUID("0c4d3f8e-6a55-4b7a-9c1e-5d2f7e8a9b10")
_VECTOR = "m"
_PAGE = 1_000
_BATCH = 256  # records per upsert request (a files part holds up to a few thousand rows)
_REQUEST_BYTES = 8 * 2**20  # JSON bytes of records per request, well under a server's 32 MB limit
SUFFIX = "_meta"


def record_id(*key: str) -> str:
    """The id of the record named by ``key`` (``("lease",)``, ``("branch", name)``, ...)."""
    return str(uuid.uuid5(_NS, "\0".join(key)))


class MetaCollection:
    """The records of one team collection (``store``: the team server's client)."""

    def __init__(self, store: ServerStore, points_collection: str) -> None:
        self.store = store
        self.name = points_collection + SUFFIX

    def ensure(self) -> None:
        """Create the collection if it is missing (with a keyword index on ``kind`` and
        ``branch`` on a server)."""
        s = self.store
        with s._lock, s._translate(self.name):
            if s._client.collection_exists(self.name):
                return
            s._client.create_collection(
                self.name, vectors_config={_VECTOR: models.VectorParams(size=1, distance=models.Distance.DOT)})
            if not s.local:
                for field_name in ("kind", "branch"):
                    s._client.create_payload_index(self.name, field_name, field_schema=models.PayloadSchemaType.KEYWORD,
                                                   wait=True)

    def exists(self) -> bool:
        s = self.store
        with s._lock, s._translate(self.name):
            return bool(s._client.collection_exists(self.name))

    def get(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """{id: payload} of the records ``ids`` that exist."""
        wanted = list(dict.fromkeys(ids))
        out: dict[str, dict[str, Any]] = {}
        s = self.store
        for i in range(0, len(wanted), _PAGE):
            with s._lock, s._translate(self.name):
                got = s._client.retrieve(self.name, ids=wanted[i : i + _PAGE], with_payload=True, with_vectors=False)
            out.update((str(r.id), dict(r.payload or {})) for r in got)
        return out

    def get_one(self, rid: str) -> dict[str, Any] | None:
        return self.get([rid]).get(rid)

    def put(self, records: dict[str, dict[str, Any]]) -> None:
        """Write (insert or replace) ``{id: payload}``, waiting until the server applied them;
        in requests of at most _BATCH records and about _REQUEST_BYTES of JSON (a server
        refuses requests over 32 MB, and a symbol graph can be large)."""
        batch: list[models.PointStruct] = []
        size = 0
        for rid, payload in records.items():
            n = len(json.dumps(payload, separators=(",", ":")))
            if batch and (len(batch) >= _BATCH or size + n > _REQUEST_BYTES):
                self._upsert(batch)
                batch, size = [], 0
            batch.append(models.PointStruct(id=rid, vector={_VECTOR: [1.0]}, payload=payload))
            size += n
        if batch:
            self._upsert(batch)

    def _upsert(self, points: list[models.PointStruct]) -> None:
        s = self.store
        with s._lock, s._translate(self.name):
            s._client.upsert(self.name, points=points, wait=True)

    def find(self, **match: str) -> dict[str, dict[str, Any]]:
        """{id: payload} of every record whose payload fields equal ``match`` (``kind="branch"``)."""
        where = models.Filter(must=[models.FieldCondition(key=k, match=models.MatchValue(value=v))
                                    for k, v in match.items()])
        out: dict[str, dict[str, Any]] = {}
        offset: Any = None
        s = self.store
        while True:
            with s._lock, s._translate(self.name):
                page, offset = s._client.scroll(self.name, limit=_PAGE, offset=offset, scroll_filter=where,
                                                with_payload=True, with_vectors=False)
            out.update((str(r.id), dict(r.payload or {})) for r in page)
            if offset is None:
                return out

    def delete(self, ids: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(ids))
        s = self.store
        for i in range(0, len(wanted), _PAGE):
            with s._lock, s._translate(self.name):
                s._client.delete(self.name, points_selector=models.PointIdsList(points=list[int | str | uuid.UUID](wanted[i : i + _PAGE])),
                                 wait=True)

    def drop(self) -> None:
        s = self.store
        with s._lock, s._translate(self.name):
            if s._client.collection_exists(self.name):
                s._client.delete_collection(self.name)


def scroll_paths(store: ServerStore, collection: str, paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(point id, payload) of every point of ``collection`` whose ``path`` is one of ``paths``
    (no vectors), scrolled in pages."""
    where = models.Filter(must=[models.FieldCondition(key="path", match=models.MatchAny(any=list(paths)))])
    out: list[tuple[str, dict[str, Any]]] = []
    offset: Any = None
    while True:
        with store._lock, store._translate(collection):
            page, offset = store._client.scroll(collection, limit=10_000, offset=offset, scroll_filter=where,
                                                with_payload=True, with_vectors=False)
        out.extend((str(r.id), dict(r.payload or {})) for r in page)
        if offset is None:
            return out
