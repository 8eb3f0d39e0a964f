"""Vector stores: ``embedded`` (Qdrant Edge, default) and ``server`` (qdrant-client)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gitrag.index.store.base import DENSE, RRF_K, SPARSE, BranchView, Hit, PointRecord, SearchFilter, SparseVec, Store

if TYPE_CHECKING:
    from gitrag.config import Settings

__all__ = ["DENSE", "RRF_K", "SPARSE", "BranchView", "Hit", "PointRecord", "SearchFilter", "SparseVec", "Store", "open_store"]


def open_store(settings: Settings, data_dir: Path) -> Store:
    """The server store when ``settings.qdrant_url`` is set, else the embedded one in ``data_dir``."""
    if settings.qdrant_url:
        from gitrag.index.store.server import ServerStore

        return ServerStore(settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    from gitrag.index.store.edge import EdgeStore

    return EdgeStore(Path(data_dir) / "qdrant")
