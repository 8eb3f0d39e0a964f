"""Code-aware sparse vectors: BM25 term weights over identifier-aware terms.

Terms: every identifier kept whole (``_unpack_args``, ``os.path.join``), plus its parts split
on snake_case, camelCase, digits and dots (``unpack``, ``args``, ``path``, ``join``), all
lower-cased, minus a small stop list; each alphabetic part also adds its English stem
(Porter2, via snowballstemmer: ``sessions`` -> ``session``, ``routing`` -> ``rout``) so a
question's words meet the code's inflections; snowballstemmer runs PyStemmer's compiled
Snowball when it is importable (a dependency: the same stems, ~18x faster). A document's weight for a term is the BM25 term
frequency part, ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / AVGDL))`` (Robertson &
Zaragoza 2009) with k1 = 1.2, b = 0.75 and a fixed average length; the IDF part is applied
by Qdrant's ``Modifier.IDF`` on the collection, so document vectors never go stale when the
corpus grows. Term ids are CRC-32 of the term (stable across processes and machines).
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from functools import lru_cache

import numpy as np
import snowballstemmer

from gitrag.index.records import SparseVec

# Bump when terms or weights change: cached sparse vectors are keyed by it, and every
# branch's points are rewritten on its next sync.
VERSION = "2"
_STEMMER = snowballstemmer.stemmer("english")

K1 = 1.2
B = 0.75
AVGDL = 120.0  # a typical chunk's term count; fixed so weights need no corpus statistics

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*|\d+")
# The words of one camelCase piece: ``HTTPServerError`` -> HTTP, Server, Error; ``utf8`` -> utf, 8.
# Ranking's path match splits file names with it too, so a question word meets what was indexed.
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

STOP = frozenset(
    """a an and are as at be by for from has have how in into is it its of on or that the
    their then there these this to was were what when where which who why will with does do
    can should would could via per not no""".split()
)


def terms(text: str) -> list[str]:
    """Terms of ``text`` in order, with repeats: whole identifiers and their parts, lower-case."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        out.extend(_word_terms(word))
    return out


@lru_cache(maxsize=65536)
def _word_terms(word: str) -> tuple[str, ...]:
    """The terms one identifier adds, in order (cached: identifiers repeat across chunks)."""
    whole = word.lower().strip("_$")
    if len(whole) < 2 or whole in STOP:
        return ()
    out = [whole]
    parts, words = _split(word)
    if len(parts) > 1 or (parts and parts[0] != whole):
        out.extend(p for p in parts if p != whole)
    for part in words:
        root = stem(part)
        if root != part:
            out.append(root)
    return tuple(out)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter2 stem of an alphabetic word of 4+ letters (``sessions`` -> ``session``); other
    words, and a word whose stem would be under 3 letters (``being`` -> ``be``, ``doing`` ->
    ``do``: a stop word or a language's name, not an inflection), unchanged. The sparse
    terms' stemmer, and ranking's path match, so both stem alike (cached)."""
    if len(word) < 4 or not word.isalpha():
        return word
    root = _STEMMER.stemWord(word)
    return root if len(root) >= 3 else word


def _split(word: str) -> tuple[list[str], list[str]]:
    """(parts, words): parts are the dot/underscore pieces and their camelCase words;
    words only the single words (the ones worth stemming)."""
    parts: list[str] = []
    words: list[str] = []
    for piece in re.split(r"[._$]+", word):
        if not piece:
            continue
        sub = [s.lower() for s in CAMEL.findall(piece) or [piece]]
        if len(sub) > 1:
            parts.append(piece.lower())
        parts.extend(sub)
        words.extend(sub)
    keep = [p for p in dict.fromkeys(parts) if len(p) >= 2 and p not in STOP]
    return keep, [w for w in dict.fromkeys(words) if len(w) >= 4 and w not in STOP]


@lru_cache(maxsize=65536)
def term_id(term: str) -> int:
    """CRC-32 of the term's UTF-8 bytes (cached)."""
    return zlib.crc32(term.encode("utf-8", "surrogatepass"))


def _term_counts(text: str) -> dict[str, int]:
    """``Counter(terms(text))``, the same counts in the same order, from each distinct
    identifier once: a chunk repeats its identifiers, so this expands (and looks up) each
    one once instead of at every occurrence. A term is first seen in the first identifier
    that yields it, which is where ``terms`` first yields it too."""
    counts: dict[str, int] = {}
    for word, n in Counter(_IDENT.findall(text)).items():
        for term in _word_terms(word):
            counts[term] = counts.get(term, 0) + n
    return counts


def _vector(weights: dict[int, float]) -> SparseVec:
    idx = sorted(weights)
    return SparseVec(idx, [float(weights[i]) for i in idx])


def document_vector(text: str) -> SparseVec:
    """BM25-TF weighted sparse vector of a chunk's text (IDF is applied by the store)."""
    counts = _term_counts(text)
    dl = sum(counts.values()) or 1
    norm = K1 * (1 - B + B * dl / AVGDL)
    tids = np.fromiter(map(term_id, counts), dtype=np.int64, count=len(counts))
    order = np.argsort(tids, kind="stable")
    ids = tids[order]
    if ids.size > 1 and bool((ids[1:] == ids[:-1]).any()):  # two terms with one CRC-32: summed in term order
        weights: dict[int, float] = {}
        for term, tf in counts.items():
            tid = term_id(term)
            weights[tid] = weights.get(tid, 0.0) + tf * (K1 + 1) / (tf + norm)
        return _vector(weights)
    # the same float64 operations as the loop above, on every term at once
    freq = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))[order]
    return SparseVec(ids.tolist(), (freq * (K1 + 1) / (freq + norm)).tolist())


def query_vector(text: str, weights: dict[str, float] | None = None) -> SparseVec:
    """Sparse vector of a question: weight 1 per distinct term of ``text``, or, with
    ``weights`` (term -> weight, e.g. from gitrag.query.ranking.query for a long question), those
    weights and ``text`` unused. The store multiplies each by the term's IDF."""
    if weights is None:
        return _vector({term_id(t): 1.0 for t in dict.fromkeys(terms(text))})
    out: dict[int, float] = {}
    for term, weight in weights.items():
        tid = term_id(term)
        out[tid] = out.get(tid, 0.0) + float(weight)
    return _vector(out)


def with_path(vec: SparseVec, path: str, weight: float = 1.0) -> SparseVec:
    """``vec`` plus the terms of a file path (``src/click/core.py`` -> src, click, core, py).

    Chunk texts (and so their cached vectors) do not contain the path, so a renamed file
    re-embeds nothing; the path's terms are added here, per point, at no embedding cost."""
    weights = dict(zip(vec.indices, vec.values))
    for tid in _path_term_ids(path):
        weights[tid] = weights.get(tid, 0.0) + weight
    return _vector(weights)


@lru_cache(maxsize=4096)
def _path_term_ids(path: str) -> tuple[int, ...]:
    """Term ids of a path's distinct terms, in order (cached: every chunk of a file asks)."""
    return tuple(term_id(t) for t in dict.fromkeys(terms(path.replace("/", " ").replace(".", " "))))
