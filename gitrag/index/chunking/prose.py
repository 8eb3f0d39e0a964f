"""How much of a chunk is prose: comments and docstrings, as a share of its characters.

A chunk that is mostly a docstring or a comment block (a public function whose body is one
call under forty lines of documentation, a class header that is its docstring) describes
what the code does in words; the ranking (gitrag.query.ranking.stages.apply_prose_prior) weighs
it like documentation for questions about how something works. The share is measured on
the parse tree, so it holds for every grammar: every node whose type names a comment
(``comment``, ``line_comment``, ``block_comment`` ...) and, in Python, a string that is a
statement of its own (a docstring, PEP 257). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_WHITESPACE = b" \t\n\r\x0b\x0c"
_queries: dict[str, Any] = {}


def _query(language_name: str) -> Any:
    """The cached query capturing comments (and Python docstrings) as ``p``; None when the
    grammar has no such node type."""
    if language_name in _queries:
        return _queries[language_name]
    from tree_sitter import Query

    from gitrag.index.chunking.treesitter import get_language

    language = get_language(language_name)
    kinds = {language.node_kind_for_id(i) for i in range(language.node_kind_count)}
    named = sorted(k for k in kinds if k and "comment" in k and language.id_for_node_kind(k, True) is not None)
    patterns = [f"({k})" for k in named]
    if language_name == "python":
        patterns.append("(expression_statement . (string) .)")
    query = _queries[language_name] = Query(language, "[{}] @p".format(" ".join(patterns))) if patterns else None
    return query


def prose_ranges(tree: Any, language_name: str) -> list[tuple[int, int]]:
    """Byte ranges ``[start, end)`` of the tree's comments and docstrings, sorted and
    disjoint. A tree with syntax errors gives [] (the query engine goes superlinear on wide
    ERROR nodes, see gitrag.index.chunking.graph): such a file gets no prose shares."""
    root = tree.root_node
    query = _query(language_name)
    if query is None or root.has_error:
        return []
    from tree_sitter import QueryCursor

    nodes = QueryCursor(query).captures(root).get("p", [])
    out: list[tuple[int, int]] = []
    for start, end in sorted((n.start_byte, n.end_byte) for n in nodes):
        if out and start < out[-1][1]:  # nested (a comment inside a captured string): keep the outer
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _solid(data: bytes) -> int:
    """Bytes that are not ASCII whitespace."""
    return len(data.translate(None, _WHITESPACE))


def prose_shares(data: bytes, ranges: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[float]:
    """For each ``[start, end)`` byte span of ``data`` (sorted by start), the share of its
    non-whitespace bytes inside ``ranges`` (from :func:`prose_ranges`), in [0, 1], rounded to
    2 decimals; 0.0 for a span of whitespace only. Linear in spans + ranges."""
    out: list[float] = []
    first = 0
    for start, end in spans:
        while first < len(ranges) and ranges[first][1] <= start:
            first += 1
        total = _solid(data[start:end])
        prose = 0
        i = first
        while i < len(ranges) and ranges[i][0] < end:
            a, b = max(start, ranges[i][0]), min(end, ranges[i][1])
            if a < b:
                prose += _solid(data[a:b])
            i += 1
        out.append(round(prose / total, 2) if total else 0.0)
    return out
