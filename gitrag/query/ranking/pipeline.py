"""The ranking pipeline: fused candidates -> named stages -> the top k, deterministically.

Order: fusion (dense weight by query type) -> a pasted issue's parts' lists fused in (multi-query) -> the
similar fixes' files join -> definitions -> quoted messages -> named files join -> path match -> imported modules -> coherence ->
path priors -> generated copies -> import lists -> prose prior -> role priors -> similar-fix prior -> named
definitions pinned above the rest -> greedy top-k with file saturation. Each stage can be switched off by name
(:data:`STAGES`) to measure what it adds (``gitrag eval --ablate STAGE``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

from gitrag.query.ranking import history_prior, messages, modules, multi, restated, stages
from gitrag.query.ranking.query import Query
from gitrag.query.ranking.stages import Candidate, DefinitionSite

#: Files a pasted text names (paths, code-host links, traceback frames) that join the
#: candidates when no chunk of theirs is one, at most this many, in the order the path-match
#: stage raises them (links, then the innermost frame first, then text order).
NAMED_FILES_JOIN = 5


def _x(value: float) -> str:
    """A constant as the stage texts print it: 0.5, 3, 0.25."""
    return f"{value:g}"


def describe() -> dict[str, str]:
    """Stage name -> what it does, its numbers read from the constants that set them (so the
    text cannot drift from the code). Every name can be passed to ``disabled``."""
    s, h = stages, history_prior
    priors = sorted({s.STRONG_PRIOR, s.DOCS_PRIOR})
    return {
        "query-weights": f"dense weight {_x(s.DENSE_WEIGHT_SYMBOL)} instead of {_x(s.DENSE_WEIGHT)} when the question "
                         "is one code token",
        "definitions": f"chunks defining a name the question uses gain {_x(s.DEFINITION_BOOST)}x the top score "
                       f"(x{_x(s.DEFINITION_STEM_FACTOR)} in a file named so)",
        "test-names": "for a pasted text, names boost no definition in a test file unless tests are asked for "
                      "(the definitions stage)",
        "messages": f"chunks whose string literals hold a message the question quotes (runs of "
                    f"{messages.RUN_WORDS}+ words verbatim) gain {_x(messages.MESSAGE_BOOST)}x top x the share of its "
                    f"words they hold; the messages' sparse list's top {messages.MESSAGE_DEPTH} join the candidates",
        "error-lines": "the messages of pasted error lines (TypeError: ..., error: ..., Error: ...) count as quoted "
                       "messages (the messages stage)",
        "path-match": "query words (or their stems) naming a file stem or folder, and files a long question names, "
                      "raise that file",
        "named-files": f"the files a long question names (paths, code-host links, frames) that no candidate is in "
                       f"join the candidates (at most {NAMED_FILES_JOIN}), for path-match to raise",
        "modules": "a pasted issue's Python imports (from a.b.c import x) raise files in and near those modules "
                   f"by {_x(modules.MODULE_BOOST)}x top x the share of the package path they share",
        "coherence": f"each file's best chunk gains {_x(s.COHERENCE)}x top score by the file's share of the "
                     "candidates' score",
        "path-priors": f"tests, compat, examples, docs, changelogs, tool configurations x{'-'.join(_x(p) for p in priors)} and __init__.py "
                       f"x{_x(s.INIT_PRIOR)} unless asked for",
        "prose": f"chunks that are mostly comments or docstrings x(1 - {_x(1 - s.PROSE_PRIOR)} x prose share) unless "
                 "docs are asked for",
        "copies": f"generated amalgamations (singleheader/, single_include/, *amalgamat*) x{_x(restated.COPY_PRIOR)} "
                  "unless asked for",
        "imports": f"for a pasted issue, chunks that only import or re-export x{_x(restated.IMPORTS_PRIOR)} unless its "
                   "title asks about imports",
        "roles": f"option declarations x(1 - {_x(1 - s.DECL_PRIOR)} x share), test code in implementation files "
                 f"x(1 - {_x(1 - s.TEST_ROLE_PRIOR)} x share), unless asked for",
        "saturation": f"the n-th further chunk of one file is scaled by {_x(s.SATURATION_DECAY)}^n in the greedy "
                      "top-k, unless the question names it",
        "multi-query": f"a pasted issue's parts (title, prose, up to {multi.parts.MAX_CODE_PARTS} code blocks) are "
                       f"searched on their own; their lists' reciprocal-rank fusion is {_x(multi.PART_WEIGHT)} of the "
                       f"fused score, each list's top {multi.PART_TOP} join the candidates",
        "long-query": "long questions: traceback frames, paths, names; a digest is embedded, terms weighed by count",
        "history": f"files changed by past commits whose messages resemble the question x(1 + {_x(h.STRENGTH)} x "
                   "share), share <= 1 (similar fixes)",
        "pin": f"the definitions a one-token question names (at most {s.MAX_DEFINITIONS} sites) end "
               f"x{_x(s.PIN_MARGIN)} above every chunk it does not name",
        "history-files": f"the similar fixes' files (share >= {_x(h.ADD_MIN_SHARE)}, at most {h.ADD_FILES}) join the "
                         "candidates with their chunks either list returned at any depth read, on those chunks' own "
                         "scores",
    }


#: Stage name -> what it does (:func:`describe`); every name can be passed to ``disabled``.
STAGES: dict[str, str] = describe()


class Lookup(Protocol):
    """What the stages need from the index; retrieval implements it over the symbol graph."""

    def definitions(self, name: str, exact_case: bool) -> list[DefinitionSite]:
        """Definition sites of ``name`` in scope; ``exact_case``: spelled exactly so."""

    def chunks_at(self, site: DefinitionSite) -> list[Candidate]:
        """The chunks holding the first line of the site's definition."""

    def known_paths(self, written: str) -> list[str]:
        """Indexed paths that ``written`` (as printed in a traceback or text) refers to."""

    def project_names(self) -> frozenset[str]:
        """Lower-cased names of the folders at the top two levels (``src``, ``flask``)."""


@dataclass(frozen=True)
class Ranked:
    """One ranked chunk: its point id and final score."""

    key: str
    score: float


#: A bare file name in a question ("core.py") may name at most this many indexed files.
WRITTEN_PATH_MATCHES = 3


def written_paths(written: str, paths: frozenset[str], limit: int = WRITTEN_PATH_MATCHES) -> list[str]:
    """The indexed ``paths`` (repository-relative, ``/``-separated) that a path as written in
    a question refers to, sorted; [] when none does or more than ``limit`` tie.

    A traceback prints where the code ran, not where it lives in the repository: an installed
    package is ``/home/u/.venv/lib/python3.12/site-packages/click/core.py`` while the
    repository has ``src/click/core.py``. So a written path matches the indexed paths that
    share its longest run of trailing components, when that run holds the file and its
    folder (``click/core.py``) or the whole written path (a bare ``core.py``): a file name
    alone is too common to tie an absolute path to the repository (``/home/u/app.py`` is the
    user's own file, not the repository's ``examples/app.py``)."""
    w = written.replace("\\", "/")
    while w.startswith("./"):
        w = w[2:]
    if w in paths:
        return [w]
    parts = [p for p in w.split("/") if p and p != "."]
    if not parts:
        return []
    best, found = 0, []
    for path in _by_name(paths).get(parts[-1], ()):
        have = path.split("/")
        common = 0
        while common < min(len(have), len(parts)) and have[-1 - common] == parts[-1 - common]:
            common += 1
        if common > best:
            best, found = common, [path]
        elif common == best:
            found.append(path)
    if best < min(2, len(parts)) or len(found) > limit:
        return []
    return sorted(found)


@lru_cache(maxsize=8)
def _by_name(paths: frozenset[str]) -> dict[str, list[str]]:
    """``paths`` by file name (cached per set: one commit's paths are asked many times)."""
    out: dict[str, list[str]] = {}
    for path in paths:
        out.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    return out


def frame_sites(query: Query, lookup: Lookup) -> list[list[DefinitionSite]]:
    """Per traceback frame that names an indexed file, innermost first, the definitions of
    its function in that file: when the line numbers agree, the one spanning the frame's
    line, as a site at that line (its chunk holds the line that ran, for a definition cut
    into pieces the piece that failed); else (the trace may come from another version)
    every one of that name there."""
    out: list[list[DefinitionSite]] = []
    seen: set[tuple[str, str]] = set()
    for frame in reversed(query.frames):
        if not frame.function or frame.function.startswith("<"):
            continue
        paths = set(lookup.known_paths(frame.path))
        if not paths or (frame.path, frame.function) in seen:
            continue
        seen.add((frame.path, frame.function))
        sites = [s for s in lookup.definitions(frame.function, True) if s.path in paths]
        spanning = [replace(s, line=frame.line) for s in sites if s.line <= frame.line <= s.end_line]
        if sites:
            out.append(spanning[-1:] or sites)
    return out


def join_named_files(cands: dict[str, Candidate], query: Query, lookup: Lookup,
                     file_candidates: Callable[[list[str]], list[Candidate]], dense_weight: float) -> None:
    """The indexed files a long question names that no candidate is in join the candidates (in
    place), so the path-match stage can raise them: with their chunks that the dense or the
    sparse list returned at any depth read (``file_candidates(paths)``), scored as the
    candidates are; a file neither list reached joins with its first chunk, scored 0. A
    code-host link's ``#L`` line brings the chunk holding that line in too (the code the
    reporter points at). An issue that links or names a file of the repository says where to
    look, whatever its other words match."""
    have = {c.path for c in cands.values()}
    frames = [f.path for f in reversed(query.frames)]
    written = list(dict.fromkeys([*(p for p, _ in query.links), *frames, *(p for p in query.paths if p not in set(frames))]))
    missing: list[str] = []
    for w in written:
        for path in lookup.known_paths(w):
            if path not in have and path not in missing:
                missing.append(path)
    missing = missing[:NAMED_FILES_JOIN]
    lines = [(path, line) for w, line in query.links if line for path in lookup.known_paths(w)]
    if not missing and not lines:
        return
    extra = file_candidates(missing) if missing else []
    history_prior.add_prior_candidates(cands, extra, dense_weight)
    reached = {c.path for c in extra}
    sites = [DefinitionSite(p, p, 1) for p in missing if p not in reached]
    sites += [DefinitionSite(p, p, line) for p, line in lines]
    for site in sites:
        for chunk in lookup.chunks_at(site)[:1]:
            if chunk.key not in cands:
                cands[chunk.key] = replace(chunk, score=0.0)


def check(disabled: Collection[str]) -> frozenset[str]:
    """``disabled`` as a set; ValueError naming an unknown stage."""
    unknown = sorted(set(disabled) - set(STAGES))
    if unknown:
        raise ValueError(f"unknown ranking stage {', '.join(unknown)}; choose from {', '.join(STAGES)}")
    return frozenset(disabled)


def rank(
    query: Query,
    candidates: Sequence[Candidate],
    k: int,
    lookup: Lookup,
    disabled: Collection[str] = (),
) -> list[Candidate]:
    """The best ``k`` of ``candidates`` (chunks from the dense and the sparse list, with
    their raw scores in ``dense``/``sparse``), best first, after every stage not in
    ``disabled``. Candidates may be added (definitions neither list found). Scores are
    relative to the top fused score (1.0 before boosts). ValueError for an unknown stage."""
    off = check(disabled)
    cands = {c.key: c for c in candidates}
    if not cands:
        return []
    weight = stages.DENSE_WEIGHT_SYMBOL if query.symbol_like and "query-weights" not in off else stages.DENSE_WEIGHT
    stages.fuse(cands, weight)
    part_lists = getattr(lookup, "parts", None)
    if part_lists and "multi-query" not in off:  # a pasted issue's parts, each searched on its own
        multi.fuse_parts(cands, part_lists)
    prior = lookup.history_prior(query) if "history" not in off and hasattr(lookup, "history_prior") else {}
    if prior and "history-files" not in off and hasattr(lookup, "file_candidates"):  # similar fixes' files join on their own chunks' scores
        extra = lookup.file_candidates(history_prior.prior_files(prior, (c.path for c in cands.values())))
        history_prior.add_prior_candidates(cands, extra, weight)
    if "definitions" not in off:
        frames = (lambda: frame_sites(query, lookup)) if query.frames else None
        stages.boost_definitions(cands, query, lookup.definitions, lookup.chunks_at, lookup.project_names, frames,
                                 test_sites="test-names" in off)
    if not {"messages", "error-lines"} <= off and hasattr(lookup, "chunk_texts"):
        quoted = messages.of_question(query.text, "messages" not in off, "error-lines" not in off)
        if quoted:
            messages.boost_messages(cands, quoted, lookup.chunk_texts, getattr(lookup, "message_ids", ()))
    if "path-match" not in off:
        if query.long and "named-files" not in off and hasattr(lookup, "file_candidates"):
            join_named_files(cands, query, lookup, lookup.file_candidates, weight)
        stages.boost_path_match(cands, query, lookup.known_paths)
    if "modules" not in off:
        modules.boost_modules(cands, query, lookup.known_paths)
    if "coherence" not in off:
        stages.boost_coherence(cands)
    if "path-priors" not in off:
        stages.apply_path_priors(cands, query)
    if "copies" not in off:
        restated.apply_copy_prior(cands, query)
    if "imports" not in off:
        restated.apply_imports_prior(cands, query)
    if "prose" not in off:
        stages.apply_prose_prior(cands, query)
    if "roles" not in off:
        stages.apply_role_priors(cands, query)
    if prior:
        history_prior.apply_history_prior(cands, prior)
    if "pin" not in off:
        stages.pin_named(cands)
    return stages.select(cands, k, saturation="saturation" not in off)
