"""Embedders: ``static`` (bundled, default), ``local`` (in-process transformer), ``ollama``, and ``hash`` (deterministic, tests)."""

from __future__ import annotations

from gitrag.index.embedders.base import Embedder, l2_normalise, make_fingerprint
from gitrag.index.embedders.registry import available, create, register

__all__ = ["Embedder", "available", "create", "l2_normalise", "make_fingerprint", "register"]
