"""The vector store protocol: collections of points shared by a repository's branches.

A point has an id (a UUID string), a dense vector named ``dense`` (cosine), a sparse
vector named ``sparse`` (BM25 term weights; the store applies the IDF modifier), and a
payload of coordinates only: ``path``, ``blob``, ``start_byte``, ``end_byte``,
``start_line``, ``end_line``, ``symbol``, ``kind``, ``language``, ``chunk_hash`` (never
source text), and the membership fields ``branches`` and ``hidden`` (lists of branch tags;
see :class:`BranchView`): one collection per repository and embedder is shared by all its
branches, and a search names the branch it looks at, so a branch never sees another
branch's code. Two backends implement it: ``embedded`` (Qdrant Edge) and ``server``
(qdrant-client). Writes are idempotent; :meth:`flush` makes them durable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import pathspec

from gitrag.errors import ConfigError
from gitrag.index.records import BranchView, SparseVec  # the store's protocol speaks of them

DENSE = "dense"
SPARSE = "sparse"
RRF_K = 60  # Cormack, Clarke & Buettcher, SIGIR 2009


@dataclass(frozen=True)
class PointRecord:
    id: str
    dense: np.ndarray  # float32 (dim,), L2-normalised
    sparse: SparseVec
    payload: dict[str, Any]


@dataclass(frozen=True)
class Hit:
    """One search result: the point ``id`` (UUID string), its ``score`` (cosine in [-1, 1]
    for a dense search, the IDF-weighted dot product (>= 0) for a sparse one, the RRF sum
    for a hybrid one; higher is better) and its ``payload`` (see the module doc), ``{}``
    when the search was made with ``with_payload=False``."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchFilter:
    """Scope of a search: ``path_prefix`` matches paths starting with it; ``language`` exact;
    ``exclude`` holds gitignore-style globs (``docs/**``, ``*.md``, ``tests/``) of paths to
    leave out.

    A store cannot match globs: it leaves out ``excluded_paths``, the exact paths the globs
    match, which :meth:`resolve` fills from the branch's manifest (retrieval does so before
    every query). The exclusion is part of the query (each prefetch too), so ``k`` results
    come back whenever ``k`` admitted points exist. Raises ConfigError for an empty or
    malformed glob (at construction)."""

    path_prefix: str = ""
    language: str = ""
    exclude: tuple[str, ...] = ()
    excluded_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "excluded_paths", tuple(self.excluded_paths))
        if self.exclude:
            self._spec  # noqa: B018 - validates the globs now, not at the first match

    @cached_property
    def _spec(self) -> pathspec.PathSpec | None:
        if not self.exclude:
            return None
        for glob in self.exclude:
            if not isinstance(glob, str) or not glob.strip() or "\n" in glob:
                raise ConfigError(f"invalid exclude glob {glob!r}: give a non-empty gitignore-style pattern")
        try:
            return pathspec.PathSpec.from_lines("gitignore", self.exclude)
        except Exception as exc:  # noqa: BLE001 - pathspec's GitWildMatchPatternError and friends
            raise ConfigError(f"invalid exclude glob: {exc}") from None

    def excludes(self, path: str) -> bool:
        """True when ``path`` (relative, ``/``-separated) matches an ``exclude`` glob."""
        spec = self._spec
        return spec is not None and spec.match_file(path)

    def admits(self, path: str, language: str) -> bool:
        """True when a point with this ``path`` and ``language`` is inside the scope."""
        return (path.startswith(self.path_prefix) and (not self.language or language == self.language)
                and not self.excludes(path))

    def resolve(self, paths: Iterable[str]) -> SearchFilter:
        """This filter with ``excluded_paths`` = the ``paths`` under ``path_prefix`` that
        an ``exclude`` glob matches, sorted (the manifest's paths of the branch)."""
        if not self.exclude:
            return self
        hit = sorted(p for p in set(paths) if p.startswith(self.path_prefix) and self.excludes(p))
        return replace(self, excluded_paths=tuple(hit))


class Store(Protocol):
    kind: str  # "embedded" | "server"
    exact_dense: bool  # a dense query scans every point (no approximate graph): it lists every point it can score

    @property
    def payload_fields(self) -> tuple[str, ...] | None:
        """The chunk payload fields a point written now keeps besides membership and the
        integrity fields (None: all); queries read the rest from the state's manifest rows."""

    def create_collection(self, name: str, dim: int) -> None:
        """Create the collection if it is missing (dense ``dim`` cosine + sparse with IDF)."""

    def has_collection(self, name: str) -> bool: ...

    def outdated(self, name: str) -> bool:
        """Whether the existing collection was made with an older storage layout than new
        ones get (the sync then rebuilds it from the vector cache: nothing is embedded)."""

    def drop_collection(self, name: str) -> None:
        """Delete the collection and its files; no error if missing."""

    def list_collections(self) -> list[str]: ...

    def upsert(self, name: str, points: list[PointRecord]) -> None: ...

    def delete(self, name: str, ids: list[str]) -> None:
        """Delete points by id; ids that do not exist are ignored."""

    def delete_path(self, name: str, path: str) -> None:
        """Delete every point whose payload ``path`` equals ``path``."""

    def set_payload(self, name: str, updates: dict[str, dict[str, Any]]) -> None:
        """Overwrite payload fields of existing points: ``{point_id: {field: value}}``."""

    def set_payload_of(self, name: str, ids: list[str], fields: dict[str, Any]) -> None:
        """Overwrite the same payload ``fields`` of many existing points (missing ids ignored)."""

    def ids(self, name: str, branch: BranchView | str | None = None) -> set[str]:
        """Every point id in the collection; with ``branch``, those that branch sees."""

    def count(self, name: str, branch: BranchView | str | None = None) -> int: ...

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
        """At most ``limit`` hits, best first, among the points ``branch`` sees (required:
        None searches every branch, for tools and tests only) and inside ``scope``.

        Only ``dense`` given (float32 (dim,), L2-normalised): nearest by cosine. Only
        ``sparse``: dot product with IDF. Both: one query, dense and sparse prefetches of
        ``prefetch`` candidates each, fused by reciprocal rank fusion with k = RRF_K
        (score = sum 1/(k + rank), rank counted from 0 in each prefetch list, as Qdrant
        does). ``with_payload=False``: ids and scores only (``Hit.payload`` is ``{}``),
        the same hits in the same order with the same scores (qdrant-client's local mode:
        its numpy cosines may differ in the last bit between any two calls); a payload
        costs about 10 µs a hit in Qdrant Edge, so a deep list read for its scores skips
        them and fetches the few it needs with :meth:`payloads`. Raises ValueError when
        neither vector is given, StoreError when the collection is missing."""

    def payloads(self, name: str, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The payloads of the points ``ids`` as ``{point id: payload}`` (the payload a
        search with payloads returns); ids that do not exist are left out. One request,
        for the tens of points a ranking keeps. Raises StoreError when the collection is
        missing."""

    def records(self, name: str, ids: list[str], fields: list[str] | None = None,
                ) -> dict[str, tuple[dict[str, Any], np.ndarray, SparseVec | None]]:
        """``{point id: (payload, float32 dense vector, sparse vector)}`` of the points
        ``ids`` (missing ones left out), in one request: what gitrag.index.integrity checks.
        ``fields``: only these payload fields (default: the whole payload).
        The embedded store raises StoreDamaged when the engine cannot read them."""

    def flush(self, name: str) -> None: ...

    def optimize(self, name: str) -> None:
        """Vacuum, merge and index the collection's segments where the engine does not in the
        background (Qdrant Edge); once per sync, not per write batch."""

    def size_bytes(self, name: str) -> int:
        """Disk used by the collection (0 for a server)."""

    def close(self) -> None: ...
