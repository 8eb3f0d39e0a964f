"""gitrag: a semantic code index of a git repository, kept current from git's own events."""

from __future__ import annotations

__version__ = "0.1.0"
