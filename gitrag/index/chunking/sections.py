"""Section boundaries of prose and config files: Markdown, reStructuredText, INI/TOML.

Each function returns headings as ``(byte offset of the heading line, level, title)``;
:func:`section_units` turns them into units that tile the file, each named by its title
with the enclosing titles as context.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gitrag.index.chunking.split import Unit
from gitrag.index.chunking.text import one_line

Heading = tuple[int, int, str]
SMALL_SECTION_NONWS = 300  # sections this small merge with small neighbours

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:[-*+>]|\d+[.)]|#|\||<)")
_RST_ADORN = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")
_INI = re.compile(r"^[ \t]*\[\[?([^\]\n]{1,200})\]\]?[ \t]*(?:[#;].*)?$")


def _lines(data: bytes) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pos = 0
    for raw in data.split(b"\n"):
        out.append((pos, raw.decode("utf-8", "replace").rstrip("\r")))
        pos += len(raw) + 1
    return out


def markdown_headings(data: bytes) -> list[Heading]:
    """ATX (``# Title``) and setext (``Title`` over ``===``/``---``) headings, outside
    fenced code blocks and a leading ``---`` front-matter block."""
    lines = _lines(data)
    heads: list[Heading] = []
    fence = ""
    start = _front_matter_end(lines)
    for i in range(start, len(lines)):
        offset, line = lines[i]
        if fence:
            if line.lstrip().startswith(fence):
                fence = ""
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)[:3]
            continue
        m = _ATX.match(line)
        if m:
            heads.append((offset, len(m.group(1)), (m.group(2) or "").strip()))
            continue
        m = _SETEXT.match(line)
        if m and i > start and _paragraph_line(lines[i - 1][1]) and (
            i < 2 or not lines[i - 2][1].strip() or not _paragraph_line(lines[i - 2][1])
        ) and not (heads and heads[-1][0] == lines[i - 1][0]):
            heads.append((lines[i - 1][0], 1 if m.group(1)[0] == "=" else 2, lines[i - 1][1].strip()))
    return heads


def _paragraph_line(line: str) -> bool:
    return bool(line.strip()) and not _NOT_PARAGRAPH.match(line) and not _FENCE.match(line)


def _front_matter_end(lines: list[tuple[int, str]]) -> int:
    if not lines or lines[0][1].strip() != "---":
        return 0
    for i in range(1, min(len(lines), 200)):
        if lines[i][1].strip() in ("---", "..."):
            return i + 1
    return 0


def rst_headings(data: bytes) -> list[Heading]:
    """Titles underlined (optionally overlined) with a repeated punctuation character;
    levels follow the order in which adornment styles first appear."""
    lines = _lines(data)
    styles: list[tuple[str, bool]] = []
    heads: list[Heading] = []
    i = 0
    while i + 1 < len(lines):
        title, under = lines[i][1], lines[i + 1][1]
        over = i > 0 and bool(_RST_ADORN.match(lines[i - 1][1]))
        if (title.strip() and not _RST_ADORN.match(title) and _RST_ADORN.match(under)
                and len(under.rstrip()) >= len(title.strip()) and not title.startswith(" ")):
            style = (under[0], over)
            if style not in styles:
                styles.append(style)
            offset = lines[i - 1][0] if over else lines[i][0]
            heads.append((offset, styles.index(style) + 1, title.strip()))
            i += 2
            continue
        i += 1
    return heads


def ini_headings(data: bytes) -> list[Heading]:
    """``[section]`` / ``[[array.of.tables]]`` header lines (all at level 1)."""
    return [(offset, 1, m.group(1).strip()) for offset, line in _lines(data)
            if (m := _INI.match(line))]


def section_units(data: bytes, heads: list[Heading], fallback: str, marker: str,
                  nonws: Callable[[int, int], int]) -> list[Unit]:
    """Units tiling ``data``: a preamble (if any) then one unit per heading.

    ``marker`` prefixes a title in context lines (``#`` for Markdown); ``nonws`` is the
    sizer's ``nonws(start, end)``, used to flag small sections as mergeable.
    """
    units: list[Unit] = []
    bounds = [h[0] for h in heads if 0 < h[0] < len(data)]
    starts = [0, *sorted(set(bounds))]
    by_offset = {h[0]: h for h in heads}
    stack: list[tuple[int, str]] = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(data)
        head = by_offset.get(start)
        if head is None:
            units.append(Unit(start, end, "section", (), fallback, (), 0, "free"))
            continue
        _, level, title = head
        while stack and stack[-1][0] >= level:
            stack.pop()
        context = tuple(one_line(f"{marker * lvl} {t}" if marker else t) for lvl, t in stack)
        title = one_line(title, 80) or fallback
        stack.append((level, title))
        small = nonws(start, end) <= SMALL_SECTION_NONWS
        units.append(Unit(start, end, "section", ((title, True),), title, context, 0, "def",
                          small_def=small))
    return units
