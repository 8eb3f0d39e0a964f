"""Helpers shared by the two store backends: names, vectors, error translation."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from gitrag.errors import StoreDamaged, StoreError, StoreHeld

# Collection names become directory names (embedded) or URL segments (server).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")

# Payload fields that get a keyword index: path (with prefix matching), language, symbol,
# and the branch membership fields every search filters on (see gitrag.index.store.base.BranchView).
KEYWORD_FIELDS = ("path", "language", "symbol", "branches", "hidden")
BRANCHES = "branches"
HIDDEN = "hidden"

_DISK_FULL = ("no space left on device", "disk full", "enospc", "os error 28")
_LOCKED = ("wouldblock", "would block", "resource temporarily unavailable", "os error 11")


def check_name(name: str) -> str:
    """``name`` unchanged if it is a valid collection name, else :class:`StoreError`.

    Valid: 1-255 characters of ``[A-Za-z0-9_.-]``, starting with a letter or digit."""
    if not _NAME.match(name):
        raise StoreError(f"invalid collection name {name!r}: use letters, digits, '_', '.', '-'")
    return name


def dense_list(vector: np.ndarray) -> list[float]:
    """A dense vector as a plain list of Python floats (what both clients accept)."""
    return np.asarray(vector, dtype=np.float32).ravel().tolist()


def str_id(point_id: Any) -> str:
    """A point id as the canonical lowercase UUID string (engines return ``uuid.UUID``)."""
    return str(point_id)


def explain(exc: BaseException, where: str) -> str:
    """One line saying what failed at ``where`` and what to do about it."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC or any(s in low for s in _DISK_FULL):
        return f"the disk holding {where} is full: free space and run `gitrag index` again"
    if any(s in low for s in _LOCKED):
        return (
            f"{where} is open in another process (is the gitrag daemon running?): "
            "stop it or use it, then retry"
        )
    if "dimension" in low:
        return f"{where}: the vector size does not match the collection's ({text}): the embedder changed"
    return f"{where}: {text}"


@contextmanager
def translate(where: str) -> Iterator[None]:
    """Turn any engine exception raised inside the block into :class:`StoreError`."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # the engines raise bare Exception
        raise (StoreHeld if is_held(exc) else StoreError)(explain(exc, where)) from exc


def is_held(exc: BaseException) -> bool:
    """Whether an engine exception says the store is open (locked) in another process."""
    low = (str(exc) or type(exc).__name__).lower()
    return any(s in low for s in _LOCKED)


def _known(low: str, exc: BaseException) -> bool:
    """A failure of the system (full disk, a lock, the embedder's size), not of the files."""
    return (isinstance(exc, OSError) and exc.errno == errno.ENOSPC or any(s in low for s in _DISK_FULL)
            or any(s in low for s in _LOCKED) or "dimension" in low)


def damaged(where: str, what: str) -> StoreDamaged:
    """The one-line error for a collection whose files fail (``what``: how, in a few words)."""
    return StoreDamaged(f"{where} is damaged ({what}): it is rebuilt from the vector cache and git "
                        "(nothing is embedded again); if this persists run `gitrag index --rebuild`")


@contextmanager
def checked(where: str) -> Iterator[None]:
    """Like :func:`translate`, for calls on an existing collection: an engine error that is
    not a full disk, a lock or a vector size means the files are bad (StoreDamaged; the
    engine's own words, cut to one short line, in parentheses)."""
    try:
        yield
    except (StoreError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # bare Exception, and pyo3's PanicException (a BaseException) on bad files
        text = " ".join((str(exc) or type(exc).__name__).split())
        if _known(text.lower(), exc):
            raise (StoreHeld if is_held(exc) else StoreError)(explain(exc, where)) from exc
        short = text if len(text) <= 120 else text[:117] + "..."
        raise damaged(where, f"the engine says: {short}") from exc
