"""The literals prior: chunks that are mostly string and number literals are data, not code.

Message tables (pylint's ``msgs = {"W0101": ("Unreachable code", ...)}``), lookup and
numeric tables (a float-printing library's powers of ten, a hash table's primes), error
strings listed one per line: their words and numbers match almost any question (a table of
messages repeats the project's vocabulary; a table of numbers matches every digit of a
pasted output), while the code that reads them is elsewhere. What marks them is lexical
and the same in every language the chunker reads: the share of a chunk's word characters
inside quoted strings (``"..."``, ``'...'``) and numeric literals (``42``, ``0x1F``,
``1.5e3``) against those of its names and keywords; Python's triple-quoted strings are
docstrings, the ``prose`` prior's, and are left out.

    share <= LITERAL_FREE (0.5): x1 (code with its messages and constants)
    share 1.0: x LITERAL_PRIOR (0.5), linear in between

Not applied when the question asks for options or data (gitrag.query.ranking.stages.asks_of),
where a table is the answer. Pure: the texts come from the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gitrag.index.chunking.languages import SPECS
from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import Candidate, asks_of

LITERAL_FREE = 0.5  # up to half the characters in literals: ordinary code
LITERAL_PRIOR = 0.5  # all literals: as a data file (stages.DATA_PRIOR)

_TRIPLE = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*\'\'\'', re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"(?<![\w.])(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)[lLfFuU]*(?!\w)")


def literal_share(text: str) -> float:
    """The share (0..1) of ``text``'s word characters that are literals: the non-blank
    characters of its quoted strings and the digits of its numbers, over those plus the
    letters, digits and underscores of everything else (names and keywords; punctuation
    and separators count for neither side, so ``2, 3, 5`` is all literal). Triple-quoted
    strings are left out of both counts; 0.0 for a text without words."""
    text = _TRIPLE.sub(" ", text)
    inside = sum(len(m.group(0)) - m.group(0).count(" ") for m in _STRING.finditer(text))
    rest = _STRING.sub(" ", text)
    inside += sum(len(m.group(0)) for m in _NUMBER.finditer(rest))
    names = sum(len(w) for w in _WORD.findall(_NUMBER.sub(" ", rest)))
    total = inside + names
    return inside / total if total else 0.0


def literal_factor(share: float) -> float:
    """The multiplier of a chunk with this literal share: 1.0 up to LITERAL_FREE, then
    linear down to LITERAL_PRIOR at 1.0."""
    excess = max(0.0, share - LITERAL_FREE) / (1.0 - LITERAL_FREE)
    return 1.0 - (1.0 - LITERAL_PRIOR) * min(1.0, excess)


def apply_literals_prior(cands: dict[str, Candidate], query: Query,
                         texts: Callable[[list[Candidate]], dict[str, str]]) -> None:
    """Scale each candidate by :func:`literal_factor` of its text's share (``texts``:
    candidates -> {key: source text}; a candidate without a text keeps its score), unless
    the question asks for options or data (in place)."""
    if asks_of(query) & {"options", "data"}:
        return
    code = [c for c in cands.values() if c.payload and c.payload.get("language") in SPECS]  # code, not prose or data
    found = texts(code)
    for c in code:
        text = found.get(c.key)
        if text:
            c.score *= literal_factor(literal_share(text))

