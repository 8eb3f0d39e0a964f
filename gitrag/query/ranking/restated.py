"""Priors for code that restates code found elsewhere: generated copies and import lists.

Two stages of gitrag.query.ranking.pipeline, each a multiplier on the candidates it marks,
lifted when the question asks for what they are:

- ``copies``: a committed **amalgamation** (single-header or single-file distribution) is
  every header of the project concatenated by a script: each definition exists twice, and
  the copy, being one huge file that matches every question, outranks the original (on the
  localization sets, simdjson's ``singleheader/simdjson.h`` was the first file in 3 of its
  4 misses, above the ``include/`` header the fix changed). The fix goes to the original;
  the generator rewrites the copy. Marked by the folder and file names the C and C++
  ecosystems use for them (``singleheader/``, ``single_include/``, ``amalgamation/``,
  ``*amalgamat*``); scaled as generated code is (x0.3, gitrag.query.ranking.stages).
- ``imports``: a chunk that is only imports or re-exports (the chunker labels it
  ``<imports>`` / ``<exports>``) names every module and symbol its file uses, so a pasted
  issue's words (its reproduction imports the same names) match it, yet it does nothing:
  the function using those names is the answer. Scaled as documentation is (x0.5) for
  pasted text, unless its title asks about imports. Not for a typed question: there an
  import block is often the answer ("where is X exported", "which modules does Y pull
  in"): on the semble sets scaling it for every question lost fastapi 0.006 and requests
  0.012 nDCG@10.
"""

from __future__ import annotations

import re

from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import DOCS_PRIOR, GENERATED_PRIOR, Candidate, is_pasted

_COPY = re.compile(r"(?:^|/)(?:single[-_]?headers?|single[-_]?include|amalgamat\w*)/|(?:^|/)[^/]*amalgamat[^/]*$",
                   re.I)
_ASKS_COPY = re.compile(r"\b(?:single[- ]?header|single[-_ ]?include|amalgamat\w*)\b", re.I)
_IMPORT_LABELS = frozenset({"<imports>", "<exports>"})
_ASKS_IMPORTS = re.compile(r"\b(?:imports?|imported|importing|exports?|exported|re-?exports?|require[sd]?|"
                           r"circular|dependenc(?:y|ies))\b", re.I)
COPY_PRIOR = GENERATED_PRIOR
IMPORTS_PRIOR = DOCS_PRIOR


def is_copy(path: str) -> bool:
    """``path`` is a generated amalgamation by its folder or file name."""
    return _COPY.search(path) is not None


def is_imports(symbol: str) -> bool:
    """The chunk's labels (``a, <imports>``) are all import or export lists."""
    labels = [s.strip() for s in symbol.split(",") if s.strip()]
    return bool(labels) and all(s in _IMPORT_LABELS for s in labels)


def apply_copy_prior(cands: dict[str, Candidate], query: Query) -> None:
    """Scale chunks of amalgamations (:func:`is_copy`) by ``COPY_PRIOR`` unless the
    question's own words name them (in place)."""
    if _ASKS_COPY.search(query.intent):
        return
    for c in cands.values():
        if is_copy(c.path):
            c.score *= COPY_PRIOR


def apply_imports_prior(cands: dict[str, Candidate], query: Query) -> None:
    """Scale import/export-only chunks (:func:`is_imports`) by ``IMPORTS_PRIOR`` for a pasted
    question (an issue), unless it asks about imports (for a pasted text, its title asks: the rule of
    gitrag.query.ranking.stages.asks_of)
    (in place)."""
    if not is_pasted(query):
        return
    lines = [ln for ln in query.intent.splitlines() if ln.strip()]
    if lines and _ASKS_IMPORTS.search(lines[0]):
        return
    for c in cands.values():
        if is_imports(c.symbol):
            c.score *= IMPORTS_PRIOR
