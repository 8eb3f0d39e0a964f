"""Embedders: ``local`` (in-process, default), ``ollama``, and ``hash`` (deterministic, tests)."""

from __future__ import annotations

from gitrag.embedders.base import Embedder, available, create, l2_normalise, make_fingerprint, register

__all__ = ["Embedder", "available", "create", "l2_normalise", "make_fingerprint", "register"]
