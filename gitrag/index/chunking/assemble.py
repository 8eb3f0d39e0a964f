"""Final units -> :class:`Chunk` objects, with line numbers and a tiling check."""

from __future__ import annotations

from gitrag.index.chunking.model import Chunk
from gitrag.index.chunking.split import Sizer, Unit


def to_chunks(units: list[Unit], sizer: Sizer, language: str) -> list[Chunk]:
    """Chunks for ``units`` (which must tile the file); lines counted incrementally."""
    data = sizer.data
    chunks: list[Chunk] = []
    line, pos = 1, 0
    for unit in units:
        line += data.count(b"\n", pos, unit.start)
        pos = unit.start
        end_line = line + data.count(b"\n", unit.start, max(unit.start, unit.end - 1))
        chunks.append(Chunk(
            start_byte=unit.start, end_byte=unit.end, start_line=line, end_line=end_line,
            symbol=unit.symbol, kind=unit.kind, language=language, text=sizer.text(unit),
            context="\n".join(unit.context), span=sizer.span(unit),
        ))
    return chunks


def tiles(units: list[Unit], size: int) -> bool:
    """True when ``units`` are non-empty and cover ``[0, size)`` in order, edge to edge."""
    pos = 0
    for unit in units:
        if unit.start != pos or unit.end <= unit.start:
            return False
        pos = unit.end
    return pos == size
