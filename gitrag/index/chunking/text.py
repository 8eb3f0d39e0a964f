"""Embedding text of a chunk: a short header, then the whitespace-normalised source.

The text never contains line numbers, byte offsets or the file's path, so a chunk keeps
its hash when it moves inside its file, when the file is renamed, and when code moves
to another file: none of these re-embeds it. The path still reaches the dense vector:
the indexer adds the embedding of :func:`abbreviate_path` to the chunk's embedding
(see ``gitrag.index.vectors``), which measured better than the path inside the header.
"""

from __future__ import annotations

import os
import re

_MAX_SYMBOL = 100  # characters of the symbol shown in the header
_MAX_CONTEXT_LINE = 100  # characters of one enclosing signature
_MAX_CONTEXT_LINES = 2  # innermost enclosing signatures kept
_SPACES = re.compile(r"\s+")
_BLANK_RUNS = re.compile(r"\n{3,}")


def abbreviate_path(path: str) -> str:
    """Shorten ``path`` keeping its first and last two segments: ``gitrag/…/daemon/server.py``.

    Paths of at most three segments or 30 characters are returned whole.
    """
    parts = [p for p in path.split("/") if p]
    if len(parts) <= 3 or len(path) <= 30:
        short = "/".join(parts) or path
    else:
        short = f"{parts[0]}/…/{parts[-2]}/{parts[-1]}"
    return _clip(short, 120)


def one_line(text: str, limit: int = _MAX_CONTEXT_LINE) -> str:
    """Collapse all whitespace runs of ``text`` to single spaces and clip it to ``limit``."""
    if len(text) <= limit and text.isprintable() and "  " not in text:
        return text.strip()
    return _clip(_SPACES.sub(" ", text).strip(), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalise(body: str) -> str:
    """Remove common indentation and trailing spaces; collapse blank-line runs to one.

    Leading and trailing blank lines are dropped. Lines are split on ``\\n`` only.
    """
    lines = [line.rstrip() for line in body.split("\n")]
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line]
    if not indents:
        return ""
    cut = len(os.path.commonprefix(indents))
    text = "\n".join(line[cut:] for line in lines) if cut else "\n".join(lines)
    if "\n\n\n" in text:
        text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip("\n")


def header(path: str, symbol: str, context: tuple[str, ...], level: int = 0) -> str:
    """The header lines of an embedding text, ``level`` 0 (full) to 3 (empty).

    The header names the qualified symbol, then the enclosing signatures; ``path`` is
    only used to leave out a symbol that merely repeats the file name. Level 1 drops
    the enclosing signatures, 2 shortens the symbol, 3 drops it; callers raise the
    level only when the header alone would eat the token budget.
    """
    base = path.rsplit("/", 1)[-1]
    head = ""
    if level < 3 and symbol and symbol != base:
        head = _clip(symbol, _MAX_SYMBOL if level < 2 else 30)
    if level == 0 and context:
        lines = [_clip(c, _MAX_CONTEXT_LINE) for c in context[-_MAX_CONTEXT_LINES:]]
        head = "\n".join([line for line in (head, *lines) if line])
    return head


def embedding_text(head: str, body: str) -> str:
    """Join a :func:`header` and a raw body (normalised here) into the exact embedding text."""
    norm = normalise(body)
    if not head:
        return norm
    return f"{head}\n{norm}" if norm else head
