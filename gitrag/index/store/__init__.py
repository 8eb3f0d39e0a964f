"""Vector stores: ``embedded`` (Qdrant Edge, default) and ``server`` (qdrant-client).

The package's public names are the protocol (:mod:`.base`), the membership payload fields
``BRANCHES`` and ``HIDDEN``, ``damaged`` (the StoreDamaged of a store's check) and
:func:`open_store`; ``_common`` is the two backends' own."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gitrag.index.store._common import BRANCHES, HIDDEN, damaged
from gitrag.index.store.base import DENSE, RRF_K, SPARSE, BranchView, Hit, PointRecord, SearchFilter, SparseVec, Store

if TYPE_CHECKING:
    from gitrag.config import Settings

__all__ = ["BRANCHES", "DENSE", "HIDDEN", "RRF_K", "SPARSE", "BranchView", "Hit", "PointRecord", "SearchFilter", "SparseVec",
           "Store", "damaged", "open_store"]


def open_store(settings: Settings, data_dir: Path) -> Store:
    """The server store when ``settings.qdrant_url`` is set, else the embedded one in ``data_dir``."""
    if settings.qdrant_url:
        from gitrag.index.store.server import ServerStore

        return ServerStore(settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    from gitrag.index.store.edge import EdgeStore

    return EdgeStore(Path(data_dir) / "qdrant")
