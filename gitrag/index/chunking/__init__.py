"""Chunker: file bytes -> chunks (symbol-aware with tree-sitter) and symbol facts.

Entry points: :func:`analyze` and :func:`language_for`. Pipeline: detect the language;
parse with tree-sitter (bounded, see :mod:`.treesitter`); cut the tree into units
(:mod:`.outline`); split/merge them to size (:mod:`.split`, :mod:`.windows`); build the
embedding texts (:mod:`.text`); extract the symbol graph (:mod:`.graph`). Markdown, rst
and INI/TOML split at headings (:mod:`.sections`); anything else goes to line windows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gitrag.index.chunking.assemble import tiles, to_chunks
from gitrag.index.chunking.languages import SPECS, LangSpec, language_for
from gitrag.index.chunking.model import Chunk, FileAnalysis, SymbolDef, SymbolRef
from gitrag.index.chunking.split import Sizer, Unit, layout, merge

__all__ = ["Chunk", "FileAnalysis", "SymbolDef", "SymbolRef", "analyze", "content_free", "language_for",
           "CHUNKER_VERSION"]

# Bump whenever chunk boundaries, names, embedding text, which chunks are embeddable or
# the symbol graph change: cached analyses (chunks and graphs) of blobs are keyed by it.
# 4: grammar wheels; 5: content-free chunks not embeddable; 6: cAST merge of nested pieces;
# 7: module-level variables/constants are definitions in the graph (chunk texts unchanged,
# so re-chunking re-embeds nothing); 8: each chunk's prose share (comments, docstrings) in
# its payload (texts unchanged); 9: each chunk's role shares (option declarations, test code
# in implementation files; gitrag.index.chunking.roles) in its payload (texts unchanged)
CHUNKER_VERSION = "9"

CountTokens = Callable[[str], int]
_ERROR_SHARE = 0.5  # error regions above this share of the file are reported
_LAST_RESORT_BYTES = 256


def analyze(
    path: str,
    data: bytes,
    *,
    max_tokens: int = 256,
    count_tokens: CountTokens | None = None,
) -> FileAnalysis:
    """Chunk one file and extract its symbol graph. Never raises.

    ``data`` is the raw blob; chunks tile it byte for byte (an empty file has none) and
    each chunk's embedding text counts at most ``max_tokens`` by ``count_tokens``
    (default: ``ceil(len(text) / 3)``), unless the header alone exceeds a tiny cap.
    Content-free chunks (see :func:`content_free`) keep their place in the tiling with
    ``embeddable=False``.
    """
    analysis = _analyze_any(path, data, max_tokens, count_tokens)
    analysis.chunks = [replace(c, embeddable=False) if content_free(data, c.start_byte, c.end_byte) else c
                       for c in analysis.chunks]
    return analysis


def content_free(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """True when ``data[start:end]`` holds nothing but whitespace and byte-order marks and,
    when it starts the file, a ``#!`` line. A shebang names an interpreter, not what the
    file does: a script that is only its shebang is as empty as an empty file."""
    body = data[start:end].decode("utf-8", "replace").replace("\ufeff", "")
    if start == 0 and body.lstrip().startswith("#!"):
        body = body.lstrip().partition("\n")[2]
    return not body.strip()


def _analyze_any(path: str, data: bytes, max_tokens: int, count_tokens: CountTokens | None) -> FileAnalysis:
    language = language_for(path, data) or "text"
    if not data:
        return FileAnalysis(language=language)
    try:
        sizer = Sizer(data, path, max_tokens, count_tokens)
        analysis = _analyze(path, data, language, sizer)
        if analysis is not None:
            return analysis
        return _windows(sizer, language, "internal error: chunks did not tile the file")
    except Exception as exc:  # noqa: BLE001 - any bug or bad input degrades to windows
        reason = f"internal error: {type(exc).__name__}"
    try:
        return _windows(Sizer(data, path, max_tokens, count_tokens), language, reason)
    except Exception as exc:  # noqa: BLE001 - e.g. count_tokens itself fails
        return _last_resort(path, data, language, f"{reason}; {type(exc).__name__}")


def _analyze(path: str, data: bytes, language: str, sizer: Sizer) -> FileAnalysis | None:
    spec = SPECS.get(language)
    if spec is not None:
        from gitrag.index.chunking.treesitter import parse

        tree, reason = parse(language, data)
        if tree is None:
            return _windows(sizer, language, reason)
        return _from_tree(tree, spec, sizer, language)
    if language in ("markdown", "rst", "ini"):
        return _sections(sizer, language, path)
    return _windows(sizer, language, "")


def _from_tree(tree: Any, spec: LangSpec, sizer: Sizer, language: str) -> FileAnalysis | None:
    from gitrag.index.chunking.graph import extract
    from gitrag.index.chunking.outline import Outline
    from gitrag.index.chunking.prose import prose_ranges, prose_shares
    from gitrag.index.chunking.windows import split_unit

    outline = Outline(spec, sizer.data, sizer)
    root = tree.root_node
    units = layout(outline.top(root), sizer, outline.expand, lambda u: split_unit(u, sizer))
    if not tiles(units, len(sizer.data)):
        return None
    graph = extract(tree, spec, sizer.data)
    errors = sum(u.end - u.start for u in units if u.kind == "error")
    reason = ""
    if errors > _ERROR_SHARE * len(sizer.data):
        reason = f"syntax errors in {100 * errors // len(sizer.data)}% of the file"
    chunks = to_chunks(units, sizer, language)
    shares = prose_shares(sizer.data, prose_ranges(tree, language), [(c.start_byte, c.end_byte) for c in chunks])
    chunks = [replace(c, prose=share) if share else c for c, share in zip(chunks, shares)]
    chunks = _with_roles(tree, language, sizer.data, chunks)
    return FileAnalysis(language, chunks, graph.definitions,
                        graph.references, fallback_reason=reason, error_bytes=graph.error_bytes)


def _with_roles(tree: object, language: str, data: bytes, chunks: list[Chunk]) -> list[Chunk]:
    """``chunks`` with their role shares (gitrag.index.chunking.roles) set."""
    from gitrag.index.chunking.prose import prose_shares
    from gitrag.index.chunking.roles import role_ranges

    ranges = role_ranges(tree, language, data)
    if not ranges:
        return chunks
    spans = [(c.start_byte, c.end_byte) for c in chunks]
    per_role = {role: prose_shares(data, r, spans) for role, r in sorted(ranges.items())}
    out = []
    for i, c in enumerate(chunks):
        roles = tuple((role, shares[i]) for role, shares in per_role.items() if shares[i])
        out.append(replace(c, roles=roles) if roles else c)
    return out


def _sections(sizer: Sizer, language: str, path: str) -> FileAnalysis | None:
    from gitrag.index.chunking import sections
    from gitrag.index.chunking.windows import split_unit

    finder = {"markdown": sections.markdown_headings, "rst": sections.rst_headings,
              "ini": sections.ini_headings}[language]
    marker = "#" if language == "markdown" else ""
    base = path.rsplit("/", 1)[-1]
    units = sections.section_units(sizer.data, finder(sizer.data), base, marker, sizer.nonws)
    units = layout(units, sizer, lambda u: [], lambda u: split_unit(u, sizer, min_lines=10))
    if not tiles(units, len(sizer.data)):
        return None
    return FileAnalysis(language, to_chunks(units, sizer, language))


def _windows(sizer: Sizer, language: str, reason: str) -> FileAnalysis:
    """Line windows (40-60 lines, blank-line cuts preferred), byte windows in long lines."""
    from gitrag.index.chunking.windows import TEXT_MAX_LINES, TEXT_MIN_LINES, split_unit

    base = sizer.path.rsplit("/", 1)[-1] or "<text>"
    whole = Unit(0, len(sizer.data), "window", (), base, (), 0, "fixed")
    units = [whole] if sizer.fits(whole) else split_unit(
        whole, sizer, max_lines=TEXT_MAX_LINES, min_lines=TEXT_MIN_LINES)
    units = merge(units, sizer, lambda u: split_unit(u, sizer))
    return FileAnalysis(language, to_chunks(units, sizer, language), fallback_reason=reason)


def _last_resort(path: str, data: bytes, language: str, reason: str) -> FileAnalysis:
    """Fixed byte slices on character boundaries, no token counting: cannot fail."""
    from gitrag.index.chunking.text import embedding_text
    from gitrag.index.chunking.windows import char_boundary

    chunks: list[Chunk] = []
    pos, line = 0, 1
    while pos < len(data):
        end = char_boundary(data, min(len(data), pos + _LAST_RESORT_BYTES))
        end = end if end > pos else min(len(data), pos + _LAST_RESORT_BYTES)
        body = data[pos:end].decode("utf-8", "replace")
        end_line = line + data.count(b"\n", pos, end - 1)
        chunks.append(Chunk(pos, end, line, end_line, "<text>", "window", language,
                            embedding_text(path, body)))
        line += data.count(b"\n", pos, end)
        pos = end
    return FileAnalysis(language, chunks, fallback_reason=reason)
