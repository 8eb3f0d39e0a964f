"""Chunker: file bytes -> chunks (symbol-aware with tree-sitter) and symbol facts.

Entry point: :func:`analyze`. PLACEHOLDER: line windows only, until the tree-sitter
chunker lands.
"""

from __future__ import annotations

from collections.abc import Callable

from gitrag.chunking.model import Chunk, FileAnalysis, SymbolDef, SymbolRef

__all__ = ["Chunk", "FileAnalysis", "SymbolDef", "SymbolRef", "analyze", "CHUNKER_VERSION"]

# Bump whenever chunk boundaries, names or embedding text change: cached analyses of
# blobs are keyed by it.
CHUNKER_VERSION = "0"


def analyze(
    path: str,
    data: bytes,
    *,
    max_tokens: int = 256,
    count_tokens: Callable[[str], int] | None = None,
) -> FileAnalysis:
    """Chunk one file. ``data`` is the raw blob; never raises on bad input."""
    text = data.decode("utf-8", "replace")
    lines = data.splitlines(keepends=True)
    chunks: list[Chunk] = []
    pos = 0
    for i in range(0, len(lines), 40):
        part = b"".join(lines[i : i + 40])
        body = part.decode("utf-8", "replace")
        chunks.append(
            Chunk(pos, pos + len(part), i + 1, i + len(lines[i : i + 40]), f"lines {i+1}", "window", "text", f"{path}\n{body}")
        )
        pos += len(part)
    del text
    return FileAnalysis(language="text", chunks=chunks)
