"""A pasted issue's parts, each to be read on its own: the title, the prose, the code.

An issue text mixes a one-line summary, the reporter's prose, and pasted material (fenced
code, a REPL session, a traceback, program output). Read as one bag of terms, the longest
part decides: forty lines of a reproduction's variable names and output drown the title's
five words that name the subsystem, and the embedder sees only the first 256 tokens. Each
part is a query of its own (multi-query retrieval, fused by reciprocal rank), so that what
one part says is not drowned by another (gitrag.query.ranking.multi).

Pure: no I/O. Linear in the text.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from gitrag.query.ranking import boilerplate, traces

_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.S)
MAX_CODE_PARTS = 3  # pasted blocks read on their own, the longest (most terms) first
PART_CHARS = 4000  # a part's text is cut here: enough for its terms, a bound on the cost
MIN_PART_TERMS = 3  # a part with fewer distinct terms says too little to be a query
MAX_TERMS = 64  # a part's sparse terms, heaviest first


def split(question: str) -> dict[str, list[str]]:
    """``{"title": [line], "prose": [text], "code": [block, ...]}`` of a pasted question
    (template boilerplate removed first, gitrag.query.ranking.boilerplate): the first
    non-empty line; the rest without fenced code, traceback frames and REPL sessions
    (back-quoted names stay: they are the prose's words); the fenced blocks, the REPL sessions (``>>>`` / ``In [n]:`` lines with the
    output under them) and the tracebacks, at most ``MAX_CODE_PARTS``, longest first.
    A part with fewer than ``MIN_PART_TERMS`` distinct terms is left out."""
    text = boilerplate.strip(question)
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return {}
    title = lines[first].strip()
    body = "\n".join(lines[first + 1:])
    code = [m.group(1) for m in _FENCE.finditer(body)]
    rest = _FENCE.sub("\n", body)
    prose_lines: list[str] = []
    block: list[str] = []
    for line in rest.splitlines():
        stripped = line.strip()
        starts = stripped.startswith((">>>", "In [", "$ ", "Traceback (most recent call last)")) \
            or traces.is_frame_line(line)
        if starts or (block and stripped):  # a session or trace runs to the next blank line
            block.append(line)
            continue
        if block:
            code.append("\n".join(block))
            block = []
        prose_lines.append(line.replace("`", " "))
    if block:
        code.append("\n".join(block))
    prose = "\n".join(prose_lines).strip()
    code = sorted(dict.fromkeys(c[:PART_CHARS] for c in code if c.strip()), key=lambda c: -len(set(_terms(c))))
    out = {"title": [title], "prose": [prose[:PART_CHARS]], "code": code[:MAX_CODE_PARTS]}
    return {k: [p for p in v if len(set(_terms(p))) >= MIN_PART_TERMS] for k, v in out.items()}


def _terms(text: str) -> list[str]:
    from gitrag.index import sparse  # ranking sits above sparse; imported here to keep this module light

    return sparse.terms(text)


def weights(text: str) -> dict[str, float]:
    """``1 + log(tf)`` per sparse term of ``text``, the ``MAX_TERMS`` heaviest (ties by term)."""
    counts = Counter(_terms(text))
    kept = sorted(((t, 1.0 + math.log(n)) for t, n in counts.items()), key=lambda kv: (-kv[1], kv[0]))[:MAX_TERMS]
    return dict(kept)
