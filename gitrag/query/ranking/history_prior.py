"""The similar-fix prior: past commits whose messages resemble the question point at the
files they changed (issue 20's "git history" lever).

    question terms -> the commit index's FTS5 BM25 (gitrag.query.history) -> the top
    SIMILAR_COMMITS commits reachable from the indexed head that changed at most
    MAX_FIX_FILES paths -> file score = sum over those commits of
    similarity / sqrt(paths the commit changed) -> normalised by the best file
    -> each candidate chunk of a file scaled by 1 + STRENGTH x its file's share (x1 to x2)

Why these rules: a fix is usually small, so a commit that changed one file says more about
that file than one that changed twenty (the square root damps, as in tf-idf's sublinear
weights, without letting a one-file typo fix dominate); a commit changing more than
MAX_FIX_FILES paths (an import, a reformat, a release) says nothing about where a change
lives, and it also keeps the prior off single-commit corpora (an sdist imported in one
commit), where there is no history to learn from. The prior only reorders candidates the
code lists found (it adds none) and is bounded (x1 to x2), so it can reorder files; a chunk
the question names (a definition of a name in it, a traceback frame's) is scaled as the best
file is, x2: the boost of a name inside a sentence is only 1.5x the top, and after the prose
prior a caller in a file past fixes changed, doubled, outranked the definition (javapoet
"where is lookupName defined", ky "where is isTimeoutError defined").

Honesty: at an issue's base commit only earlier commits exist, so nothing leaks from the
future; but the fix itself and any commit that cites the issue number cannot be there,
which is what the prior is measured against (bench/bench_localize.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from gitrag.query.ranking.stages import Candidate

SIMILAR_COMMITS = 10  # commits whose files get a share
MAX_FIX_FILES = 20  # a commit changing more paths is not a fix to learn from
#: The best file's chunks are scaled by 1 + STRENGTH, others by their share of it: x1 to x2.
#: As strong as reciprocal rank fusion (k = 60) of the code's file list with the prior's would
#: make a file both lists name (about twice the score of one only the code list names), and
#: bounded: a definition the question names (3x the top score) still comes first.
STRENGTH = 1.0
#: Question terms in more than this share of the commits are left out ("fix", the project's
#: name, "src"): like stop words their BM25 weight is small, and their long lists made the
#: search of a long issue cost 50-75 ms on click instead of a few.
COMMON_TERM_SHARE = 0.1
MAX_TERMS = 32  # the question's terms sent (a long one's heaviest first)
#: Files the similar fixes point at most (share >= ADD_MIN_SHARE of the best, at most
#: ADD_FILES) join the candidates with their chunks that either list returned at any depth it
#: was read to (retrieval reads both SCORE_DEPTH deep): a file that past fixes of the same
#: words changed is worth ranking even when none of its chunks made either list's top
#: PREFETCH, but only on its own chunks' evidence, scored as the others are.
ADD_FILES = 5
ADD_MIN_SHARE = 0.5


def file_prior(commits: Iterable[tuple[float, Sequence[str], int]]) -> dict[str, float]:
    """{path: share in (0, 1]} from ``(similarity, changed paths, number of paths changed)``
    of the similar commits (similarity > 0, best first); the best file gets 1.0."""
    scores: dict[str, float] = {}
    for sim, paths, n_files in commits:
        if sim <= 0 or not paths or n_files > MAX_FIX_FILES:
            continue
        w = sim / math.sqrt(max(n_files, 1))
        for p in paths:
            scores[p] = scores.get(p, 0.0) + w
    top = max(scores.values(), default=0.0)
    return {p: s / top for p, s in scores.items()} if top > 0 else {}


def prior_files(prior: dict[str, float], have: Iterable[str], files: int = ADD_FILES,
                min_share: float = ADD_MIN_SHARE) -> list[str]:
    """The files of ``prior`` (best first, at most ``files``, share >= ``min_share``) that are
    not among ``have`` (the candidates' paths); ties by path."""
    seen = set(have)
    best = sorted((p for p, s in prior.items() if s >= min_share), key=lambda p: (-prior[p], p))[:files]
    return [p for p in best if p not in seen]


def add_prior_candidates(cands: dict[str, Candidate], extra: Iterable[Candidate], dense_weight: float) -> None:
    """Add ``extra`` (chunks of :func:`prior_files` with their raw ``dense``/``sparse`` list
    scores) to the fused ``cands`` (in place), each scored on the candidates' own scale:
    ``w * clip((dense - lo) / (hi - lo)) + (1 - w) * clip(...)`` with lo and hi of the
    candidates' raw scores per list, so the fused scores already given do not move (a
    chunk below every candidate of a list gets 0 from it, as a list that missed it)."""
    def scale(values: list[float]) -> tuple[float, float]:
        return (min(values), max(values)) if values else (0.0, 0.0)

    d_lo, d_hi = scale([c.dense for c in cands.values() if c.dense is not None])
    s_lo, s_hi = scale([c.sparse for c in cands.values() if c.sparse is not None])

    def norm(v: float | None, lo: float, hi: float) -> float:
        if v is None or hi - lo <= 1e-12:
            return 0.0
        return min(1.0, max(0.0, (v - lo) / (hi - lo)))

    for c in extra:
        if c.key in cands or (c.dense is None and c.sparse is None):
            continue
        c.score = dense_weight * norm(c.dense, d_lo, d_hi) + (1 - dense_weight) * norm(c.sparse, s_lo, s_hi)
        cands[c.key] = c


def apply_history_prior(cands: dict[str, Candidate], prior: dict[str, float], strength: float = STRENGTH) -> None:
    """Scale each candidate by ``1 + strength * share``: its file's prior over the best prior
    among the candidates' files (1 for a file no similar commit changed). Normalised over
    the candidates: a changelog or a test file that every fix touches should not take the
    full strength away from the code files being ranked."""
    top = max((prior.get(c.path, 0.0) for c in cands.values()), default=0.0)
    if top <= 0:
        return
    for c in cands.values():
        share = 1.0 if c.named else prior.get(c.path, 0.0) / top  # past fixes never lift a chunk over a named one
        if share:
            c.score *= 1.0 + strength * share
