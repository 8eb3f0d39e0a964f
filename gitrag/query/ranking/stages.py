"""The ranking stages after retrieval, each a plain function over scored candidates.

Every constant carries the reason it has this value; BENCHMARKS.md ("Ranking pipeline (issue 11)")
has the measured effect of switching each stage off (``gitrag eval --ablate STAGE``).
Several ideas come from semble 0.7.0 (MIT): the query-type fusion weight, the definition
boost that always wins, file coherence, path penalties and file saturation; they are
written here against gitrag's own candidates and symbol graph.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

__all__ = ["Candidate", "DefinitionSite", "ordered", "replace", "select"]
from pathlib import PurePosixPath

from gitrag.index.sparse import CAMEL, stem
from gitrag.query.ranking.query import SIGIL, Query, query_identifiers, symbol_text

# -- fusion -----------------------------------------------------------------------------------

#: Dense weight of the fused score, ``w * dense + (1 - w) * sparse`` over min-max normalised
#: scores: 0.5 for natural language. A symbol-like question is a lexical lookup; the exact
#: name is in the sparse terms, while an embedding of one token is vague (semble 0.7.0 uses
#: 0.3 too; the issue measured it as a small gain across the three semble sets).
DENSE_WEIGHT = 0.5
DENSE_WEIGHT_SYMBOL = 0.3

# -- definitions ------------------------------------------------------------------------------

#: A chunk defining a symbol the question names gains this many times the top fused score,
#: so it always ranks above every chunk that merely mentions the name: a symbol question
#: wants the definition (the old RRF bonus, at most 1/60, lost to any chunk found by both
#: lists). x1.5 when the file is named after the symbol (``sessions.py`` for ``Session``):
#: that is where a name is defined rather than re-exported or shadowed.
DEFINITION_BOOST = 3.0
DEFINITION_STEM_FACTOR = 1.5
#: A name inside a sentence may be incidental ("how does X call Y"): half strength.
EMBEDDED_FACTOR = 0.5
#: A name defined several times in one file (``@overload`` stubs, a redefinition): the last
#: definition is the one that runs, the earlier ones gain only this share of the boost.
REDEFINED_FACTOR = 0.5
#: More definitions than this for one name (``get``, ``__init__``) say nothing about which.
MAX_DEFINITIONS = 5
#: A long question names many identifiers; only the first few (traceback frames innermost
#: first, then in text order) are looked up, each boosted less than the one before.
LONG_MAX_IDENTIFIERS = 8
#: A definition a one-token question names (``checkArgument``, `` `#fetch` ``, ``Foo::bar``),
#: defined in at most ``MAX_DEFINITIONS`` places, is pinned: after every stage it ranks at
#: least this much above the best chunk the question does not name (x1.01: just above, so the
#: scores still say how close it was). The question is a lookup of that name; the stages after
#: ``definitions`` reweigh the evidence (path words, coherence, file-kind and role priors) and
#: together could put a caller above it. Not for a name inside a sentence: on click's mixed
#: questions ("how does X handle Y") pinning it lost MRR@10 .933 -> .894, the answer being
#: elsewhere; the history prior is kept from burying those by its own rule (history_prior).
PIN_MARGIN = 1.01
#: Receivers written before a member (``$this->send``, ``self.close``): not part of its name.
RECEIVERS = frozenset({"this", "$this", "self", "cls", "static", "super"})

# -- path match -------------------------------------------------------------------------------

#: Query words that name a file or its folder (``sessions`` -> ``sessions.py``, ``routing``
#: -> ``routing.py``): a file is usually named after what it does. Gain: top score x
#: (matched words / query words), when at least ``PATH_MATCH_MIN_RATIO`` of the words match.
PATH_MATCH_BOOST = 1.0
PATH_MATCH_MIN_RATIO = 0.1
PATH_MATCH_MIN_PREFIX = 3  # "depend" meets "dependencies": prefixes of 3+ letters match
#: A file a long question names (a traceback frame, a path in the text) gains this x top
#: score on every chunk, innermost frame most: it is where the failure happened.
NAMED_FILE_BOOST = 1.0

# -- coherence --------------------------------------------------------------------------------

#: A file with several good chunks is more likely the answer than one lucky chunk: each
#: file's best chunk gains 0.2 x top score x (the file's summed score / the largest sum).
COHERENCE = 0.2

# -- path priors ------------------------------------------------------------------------------

#: Tests, compatibility shims, examples and documentation restate the implementation; for
#: "how does X work" they crowd it out (on real issues, a wrong first file was documentation
#: 20 times out of 35). They are kept findable, only scaled, and not at all when the question
#: asks for them (``test``, ``example``, ``docs``, ``changelog`` ...).
STRONG_PRIOR = 0.3  # tests, compat, examples, CHANGELOG, hidden folders (.github/, .agents/)
DOCS_PRIOR = 0.5  # prose documentation (docs/, *.md, *.rst)
INIT_PRIOR = 0.5  # __init__.py: re-exports and package metadata
#: Type declaration files (``index.d.ts``, ``.pyi`` stubs) restate an implementation's
#: interface, as documentation does: on real JavaScript issues ``index.d.ts`` was a top-three
#: answer where the fix changed the ``.js`` file it declares.
DECLARATION_PRIOR = DOCS_PRIOR
VENDORED_PRIOR = STRONG_PRIOR  # vendored code (third_party/, vendor/, deps/)
DATA_PRIOR = DOCS_PRIOR  # data files: JSON, CSV, XML, snapshots
#: Generated code (protobuf/gRPC stubs, ``*.generated.*``) is rewritten by a tool, never fixed
#: by hand: its source (the ``.proto``, the generator) is the answer.
GENERATED_PRIOR = STRONG_PRIOR
#: Prose inside code (docstrings, comment blocks) restates what the code does, as docs/ files
#: do: a chunk whose non-whitespace text is a share ``p`` prose is scaled by
#: ``1 - (1 - DOCS_PRIOR) * p``, so one that is all docstring counts as a docs/ file. A public
#: wrapper under forty lines of documentation (click's ``termui.progressbar``) or a class
#: header that is its docstring otherwise outranks the code that does the work.
PROSE_PRIOR = DOCS_PRIOR
#: The same rule for the other roles a chunk's bytes can play (gitrag.index.chunking.roles): option
#: declarations (click options, argparse, clap ``Arg``/``#[arg]``, cobra flags, commander,
#: picocli) name every option and its help text, so they match almost any question about a
#: feature while the code doing the work is elsewhere: weighed like prose (x0.5 when all
#: declaration). Test code inside an implementation file (Rust's ``#[cfg(test)] mod tests``,
#: ``@Test`` methods) weighs what a test file does (x0.3 when all test).
DECL_PRIOR = DOCS_PRIOR
TEST_ROLE_PRIOR = STRONG_PRIOR
#: Roles not weighed for a pasted text (an issue): its fix changes the option declarations as
#: often as the code behind them (on fd's real issues 9 of 14 fixes change ``src/app.rs`` or
#: ``src/cli.rs``, and weighing declarations there lost file Acc@1 0.857 -> 0.643), while a
#: typed question asks how something works, which the declarations only name.
ISSUE_ROLES = frozenset({"decl"})
#: payload field -> (what a question asks for to lift the prior, the prior of an all-role chunk)
ROLE_PRIORS: dict[str, tuple[str, float]] = {
    "prose": ("docs", PROSE_PRIOR),
    "decl": ("options", DECL_PRIOR),
    "test": ("tests", TEST_ROLE_PRIOR),
}

# -- saturation -------------------------------------------------------------------------------

#: In the greedy top-k, the n-th further chunk of a file already chosen is scaled by
#: 0.5 ** n: ten chunks of one file answer one question; other files may answer it better.
#: Chunks the question itself names (a definition of a name in it, a traceback frame's) are
#: not scaled: they are not more of the same file, they are what was asked about.
SATURATION_DECAY = 0.5
SATURATION_FREE = 1  # chunks of a file taken before the decay starts


@dataclass
class Candidate:
    """A chunk being ranked. ``key`` is its point id; ``dense``/``sparse`` the raw list
    scores (None when that list did not return it); ``score`` the running score."""

    key: str
    path: str
    start_line: int
    end_line: int
    symbol: str = ""
    kind: str = ""
    score: float = 0.0
    dense: float | None = None
    sparse: float | None = None
    payload: dict = field(default_factory=dict)
    named: bool = False  # the question names it: a definition it names, a traceback frame's
    pinned: bool = False  # a definition the question names verbatim (PIN_MARGIN): ranks above the unnamed

    def sort_key(self) -> tuple[float, str, int, str]:
        """Best first; equal scores by path, line and point id, so the order is stable."""
        return (-self.score, self.path, self.start_line, self.key)


def ordered(cands: Iterable[Candidate]) -> list[Candidate]:
    return sorted(cands, key=Candidate.sort_key)


def top_score(cands: dict[str, Candidate]) -> float:
    return max((c.score for c in cands.values()), default=0.0)


# -- fusion -----------------------------------------------------------------------------------


def _normalised(values: dict[str, float]) -> dict[str, float]:
    """Min-max to [0, 1]; a single value (or all equal) maps to 1."""
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    span = hi - lo
    return {k: (v - lo) / span if span > 1e-12 else 1.0 for k, v in values.items()}


def fuse(cands: dict[str, Candidate], dense_weight: float) -> None:
    """``score = w * norm(dense) + (1 - w) * norm(sparse)``, each list min-max normalised over
    the candidates it scored (gitrag.query.retrieval reads both lists deeper than it takes
    candidates, so a chunk in one list's top keeps its real score from the other); a list
    that did not return a chunk contributes 0, its floor, for it (in place). An empty list keeps its weight: a top score
    of 1.0 means first in both lists, at most ``w`` or ``1 - w`` found by one list only."""
    d = _normalised({k: c.dense for k, c in cands.items() if c.dense is not None})
    s = _normalised({k: c.sparse for k, c in cands.items() if c.sparse is not None})
    for k, c in cands.items():
        c.score = dense_weight * d.get(k, 0.0) + (1 - dense_weight) * s.get(k, 0.0)


# -- definitions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DefinitionSite:
    """Where a name is defined: the file, the definition's first and last line."""

    name: str
    path: str
    line: int
    end_line: int = 0


def stem_matches(path: str, name: str) -> bool:
    """The file stem is the name (``sessions.py``/``Session``, ``http_adapter.py``/``HTTPAdapter``)."""
    stem = PurePosixPath(path).stem.lower()
    name = name.lower()
    flat = stem.replace("_", "")
    return name in (stem, flat, stem.rstrip("s"), flat.rstrip("s")) or name.replace("_", "") in (flat, flat.rstrip("s"))


_SEPARATOR = re.compile(r"::|->|\\|\.|(?<=[\w$])#")  # a ``#`` after a name separates (Util#check)


def written_segments(name: str) -> list[str]:
    """``name``'s segments as written, sigils kept: ``Ky.#fetch`` -> ``[Ky, #fetch]``,
    ``Util#check`` -> ``[Util, check]``, ``$this->send`` -> ``[$this, send]``."""
    return [p for p in _SEPARATOR.split(name) if p]


def named_sites(name: str, exact_case: bool, definitions: Callable[[str, bool], list[DefinitionSite]],
                modules: bool = True) -> list[DefinitionSite]:
    """The definition sites a name written in a question means, by how it is written:

    - a leading receiver is not part of the name (``$this->send``, ``self.close`` -> ``send``,
      ``close``);
    - a sigil is part of the name (``#fetch``, ``Ky.#fetch``, ``$config``): the definitions
      spelled with it, a JavaScript private ``#fetch`` and not the 69 ``fetch`` mocks of the
      tests; when none is spelled so (Javadoc's ``#lookupName``), those of the bare name if it
      looks like code by itself, else none (``#include``, a ``$HOME``);
    - a qualifier that no definition encloses may name the module (``click.echo``,
      ``utils.parse``, ``pkg.Func``): the bare name's definitions in a file or folder named
      so, when ``modules`` (not for a long question: there a dotted name is mostly what a
      program printed, ``shop.rules.Invalid: 0`` closing a traceback, and the frames say where
      it ran).

    Otherwise ``definitions(name, exact_case)`` as it is."""
    segs = written_segments(name)
    while len(segs) > 1 and segs[0] in RECEIVERS:
        segs = segs[1:]
        name = ".".join(segs)
    if not segs:
        return []
    last = segs[-1]
    sites = definitions(name, exact_case)
    if SIGIL.match(last):
        spelled = [x for x in sites if written_segments(x.name)[-1:] == [last]]
        if spelled or not query_identifiers(last[1:]):
            return spelled
        return definitions(".".join([*segs[:-1], last[1:]]), exact_case)
    if sites or len(segs) == 1 or not modules:
        return sites
    qualifiers = {q.lower().lstrip("#$") for q in segs[:-1]}
    return [x for x in definitions(last, exact_case) if qualifiers & _path_names(x.path)]


def _path_names(path: str) -> set[str]:
    """A path's folder names and file stem, lower-cased: what a module qualifier can name."""
    p = PurePosixPath(path)
    return {part.lower() for part in p.parent.parts} | {p.stem.lower(), p.stem.lower().split(".")[0]}


def boost_definitions(
    cands: dict[str, Candidate],
    query: Query,
    definitions: Callable[[str, bool], list[DefinitionSite]],
    chunks_at: Callable[[DefinitionSite], list[Candidate]],
    project_names: Callable[[], frozenset[str]] | None = None,
    frame_sites: Callable[[], list[list[DefinitionSite]]] | None = None,
    test_sites: bool = False,
) -> None:
    """Add ``DEFINITION_BOOST`` x top score to the chunks defining the question's names
    (in place; definition chunks that were not candidates join with the boost alone).

    ``definitions(name, exact_case)`` gives a name's definition sites from the symbol graph
    (``exact_case``: only definitions spelled exactly so, for capitalised English words);
    ``chunks_at(site)`` the chunks holding a site's first line; ``project_names()`` the
    lower-cased top folder names (``fastapi``, ``flask``): "how does Flask pick a handler"
    names the project, not its ``Flask`` class, so a capitalised word or an identifier
    (``FastAPI``) inside a sentence that is a project name is not looked up (a one-word
    question or a back-quoted name still is). For a long
    question, ``frame_sites()`` gives, innermost traceback frame first, the definitions each
    frame ran in (in the indexed file it names); the n-th gains ``DEFINITION_BOOST / n``:
    the failure happened there, and the fix is usually in the innermost frames.

    Which definitions a written name means is :func:`named_sites`' rule. The chunks of the
    name a one-token question is are also ``pinned`` (:data:`PIN_MARGIN`, :func:`pin_named`).

    For a long question (a pasted issue or log) the names boost no definition in a test file
    (:func:`is_test_path`) unless its first line asks for tests, or ``test_sites`` (the stage
    ``test-names`` switched off): a reporter's reproduction names its own classes and test
    methods (``AppDto``, ``testJsonAppend``), and the regression test that copied it defines
    them, so it took the first file from the code at fault (jackson-dataformat-xml's
    ``JsonAppend578Test.java``, fastjson2's ``Issue2269.java`` on the localization sets).
    Traceback frames in test files still count: the code ran there."""
    top = top_score(cands)
    if top <= 0:
        return
    wanted: list[tuple[str, bool, float, bool]] = []  # (name, exact case, weight, pinned)
    if query.symbol_like:
        wanted.append((symbol_text(query.text).rstrip("()"), False, 1.0, True))
    project = project_names() if project_names else frozenset()
    # "how does FastAPI run ..." names the project even though its spelling looks like code;
    # back-quoted (`FastAPI`) it is marked as the class
    wanted += [(n, False, EMBEDDED_FACTOR, False) for n in query.identifiers
               if query.symbol_like or n.lower() not in project or f"`{n}" in query.text]
    wanted += [(n, True, EMBEDDED_FACTOR, False) for n in query.capitalised
               if query.symbol_like or n.lower() not in project]
    no_tests = not test_sites and query.long and "tests" not in asks_of(query)
    gains: dict[str, float] = {}
    chunks: dict[str, Candidate] = {}
    pinned: set[str] = set()
    seen: set[str] = set()
    used = 0
    for name, exact_case, weight, pin in wanted:
        if name in seen or (query.long and used >= LONG_MAX_IDENTIFIERS):
            continue
        seen.add(name)
        sites = named_sites(name, exact_case, definitions, modules=not query.long)
        if no_tests:
            sites = [x for x in sites if not is_test_path(x.path)]
        if not sites or len(sites) > MAX_DEFINITIONS:
            continue
        if query.long:
            weight /= 1 + used  # frames innermost first, then text order: earlier names weigh more
        used += 1
        short = (written_segments(name) or [name])[-1].lstrip("#$")
        per_name: dict[str, float] = {}
        last: dict[tuple[str, str], int] = {}
        for x in sites:
            last[(x.path, x.name)] = max(last.get((x.path, x.name), 0), x.line)
        for site in sites:
            gain = DEFINITION_BOOST * top * weight * (DEFINITION_STEM_FACTOR if stem_matches(site.path, short) else 1.0)
            if site.line != last[(site.path, site.name)]:
                gain *= REDEFINED_FACTOR
            for chunk in chunks_at(site):
                per_name[chunk.key] = max(per_name.get(chunk.key, 0.0), gain)
                chunks.setdefault(chunk.key, chunk)
        for key, gain in per_name.items():
            gains[key] = gains.get(key, 0.0) + gain
        if pin:
            pinned.update(per_name)
    if query.long and frame_sites:
        for rank, sites in enumerate(frame_sites()):  # innermost in-repository frame first
            gain = DEFINITION_BOOST * top / (1 + rank)
            for site in sites:
                for chunk in chunks_at(site):
                    chunks.setdefault(chunk.key, chunk)
                    gains[chunk.key] = gains.get(chunk.key, 0.0) + gain
    for key, gain in gains.items():
        if key in cands:
            cands[key].score += gain
        else:
            cands[key] = replace(chunks[key], score=gain)
        cands[key].named = True
        cands[key].pinned = key in pinned


def pin_named(cands: dict[str, Candidate]) -> None:
    """Lift every ``pinned`` candidate by one amount, so that the lowest of them scores
    ``PIN_MARGIN`` x the best unpinned one (in place; nothing moves when they are above it
    already). Their order among themselves, and the others', is kept; file saturation never
    scales a named chunk, so they stay above through the top k."""
    low = min((c.score for c in cands.values() if c.pinned), default=None)
    if low is None:
        return
    best = max((c.score for c in cands.values() if not c.pinned), default=0.0)
    lift = PIN_MARGIN * best - low
    if best > 0 and lift > 0:
        for c in cands.values():
            if c.pinned:
                c.score += lift


# -- path match -------------------------------------------------------------------------------

_STOP = frozenset(
    "a an and are as at be by do does for from has have how if in is it not of on or the to was what when "
    "where which who why with".split()
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _split(name: str) -> set[str]:
    return {p.lower() for piece in re.split(r"[_.\-]+", name) for p in CAMEL.findall(piece) or [piece] if p}


def _path_parts(path: str) -> set[str]:
    p = PurePosixPath(path)
    parts = _split(p.stem)
    if p.parent.name:
        parts |= _split(p.parent.name)
    return parts


def _prefix_match(a: str, b: str) -> bool:
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= PATH_MATCH_MIN_PREFIX and long.startswith(short)


def _overlap(words: set[str], parts: set[str]) -> int:
    """How many query words equal a path part, share its English stem (``dependency`` and
    ``dependencies/``, ``routes`` and ``routing.py``) or are a 3+ letter prefix of one (or it
    of them)."""
    stems = {stem(p) for p in parts}
    return sum(1 for w in words if w in parts or stem(w) in stems or any(_prefix_match(w, p) for p in parts))


def boost_path_match(cands: dict[str, Candidate], query: Query, known_paths: Callable[[str], list[str]]) -> None:
    """Query words naming a file's stem or folder raise its chunks; for a long question,
    files it names (code-host links, then frames innermost first, then paths) raise theirs
    (in place). ``known_paths(written)`` maps a path as written (``/usr/x/click/core.py``, ``core.py``) to indexed paths it ends with."""
    top = top_score(cands)
    if top <= 0:
        return
    if query.long:
        named: dict[str, float] = {}
        # a code-host link first: the reporter points at the code they suspect, where a
        # traceback's innermost frame is only where it failed (often in a library it called)
        written = [p for p, _ in query.links] + [f.path for f in reversed(query.frames)] \
            + [p for p in query.paths if p not in {f.path for f in query.frames}]
        for rank, w in enumerate(dict.fromkeys(written)):
            for path in known_paths(w):
                named.setdefault(path, NAMED_FILE_BOOST * top / (1 + rank))
        for c in cands.values():
            c.score += named.get(c.path, 0.0)
        return
    if query.symbol_like:
        return
    words = {w.lower() for w in _WORD.findall(query.text) if len(w) > 2 and w.lower() not in _STOP}
    if not words:
        return
    cache: dict[str, float] = {}
    for c in cands.values():
        if c.path not in cache:
            ratio = _overlap(words, _path_parts(c.path)) / len(words)
            cache[c.path] = PATH_MATCH_BOOST * top * ratio if ratio >= PATH_MATCH_MIN_RATIO else 0.0
        c.score += cache[c.path]


# -- coherence --------------------------------------------------------------------------------


def boost_coherence(cands: dict[str, Candidate]) -> None:
    """Each file's best chunk gains ``COHERENCE`` x top x file sum / largest file sum (in place)."""
    top = top_score(cands)
    if top <= 0:
        return
    sums: dict[str, float] = {}
    best: dict[str, Candidate] = {}
    for c in ordered(cands.values()):
        sums[c.path] = sums.get(c.path, 0.0) + c.score
        best.setdefault(c.path, c)
    largest = max(sums.values())
    if largest <= 0:
        return
    for path, c in best.items():
        c.score += COHERENCE * top * sums[path] / largest


# -- path priors ------------------------------------------------------------------------------

_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]*|[^/]*_test|[^/]*_spec|conftest|tests?)\.\w+$|(?:^|/)[^/]*\.(?:test|spec)\.[jt]sx?$"
    r"|(?:^|/)[^/]*Tests?\.(?:java|kt|cs|swift|php)$"
)
#: Test folders by the conventions of each ecosystem: ``tests/``, ``test/`` (and Maven/Gradle's
#: ``src/test/java``), ``__tests__/`` (Jest), ``spec/`` (RSpec, Jasmine), Go's ``testdata/``,
#: fixtures, Rust's ``benches/``, benchmark folders, end-to-end suites.
_TEST_DIR = re.compile(r"(?:^|/)(?:tests?|__tests__|spec|testing|testdata|test[-_]?data|fixtures?|__fixtures__|"
                       r"__mocks__|benches|benchmarks?|e2e|integration[-_]tests?)/", re.I)
_COMPAT_DIR = re.compile(r"(?:^|/)(?:compat|_compat|legacy)/")
_EXAMPLES_DIR = re.compile(r"(?:^|/)(?:[\w.-]+[-_])?(?:_?examples?|docs?_src|samples?|demos?)/")  # rayon-demo/
#: Project metadata: hidden folders (``.github/`` with its issue templates, ``.agents/``),
#: release notes, contribution and licence files, CI configurations.
_META = re.compile(r"(?:^|/)(?:\.[\w-]+/|CHANGE(?:S|LOG)[^/]*$|HISTORY[^/]*$|NEWS[^/]*$|RELEASE[-_ ]?NOTES[^/]*$"
                   r"|CONTRIBUTING[^/]*$|CODE_OF_CONDUCT[^/]*$|SECURITY\.md$|(?:LICEN[CS]E|COPYING|NOTICE|AUTHORS)[^/]*$"
                   r"|(?:appveyor|\.?travis|azure-pipelines|\.?gitlab-ci|codecov|\.?cirrus)\.ya?ml$|Jenkinsfile$)", re.I)
#: Vendored code (a copied test framework, a bundled library): someone else's, fixed upstream.
_VENDORED = re.compile(r"(?:^|/)(?:vendor|vendored|third[-_]?party|3rdparty|external|extern|deps)/", re.I)
#: Data files (JSON, CSV, XML, snapshots, fuzzing dictionaries): inputs, not the code that
#: reads them; a long test resource file otherwise matches any question about its format.
_DATA = re.compile(r"\.(?:json|jsonl|ndjson|csv|tsv|xml|dict|snap|svg|dat)$", re.I)
_DOCS = re.compile(r"(?:^|/)docs?/|\.(?:md|mdx|rst|txt|adoc|html?)$", re.I)
#: Configuration files of the project's documentation and lint tools (Doxygen's ``Doxyfile``,
#: ``mkdocs.yml``, ``pylintrc``, ``tox.ini``): they name every option of the tool, so an issue's
#: words about options match them, while the fix is in the code that reads the options. Scaled
#: as prose docs are (x0.5) and, like them, not when the question asks for docs; nor when it
#: asks about a configuration (``_ASKS["config"]``).
_TOOL_CONFIG = re.compile(r"(?:^|/)(?:Doxyfile[\w.-]*|mkdocs\.ya?ml|[\w-]*lintrc|tox\.ini)$")
#: TypeScript declaration files, Python stubs, and shell completion scripts (zsh ``_tool``,
#: bash/fish completions: they declare every option again, in the shell's language)
_DECLARATION = re.compile(r"\.d\.[cm]?ts$|\.types?\.ts$|\.pyi$|(?:^|/)(?:completions?|autocomplete|shell[-_]?completions?)/"
                          r"|[-_.]completions?\.(?:bash|zsh|fish|sh|ps1)$|\.(?:bash|zsh|fish)[-_]completion$", re.I)
_GENERATED = re.compile(r"\.pb(?:\.gw)?\.go$|_pb2(?:_grpc)?\.pyi?$|\.pb\.(?:cc|h)$|[._]generated\.\w+$|"
                        r"(?:^|/)(?:generated|__generated__|javadoc|apidocs|jsdoc|doxygen)/", re.I)  # API docs too

_ASKS = {
    "tests": re.compile(r"\b(?:tests?|tested|testing|unit ?tests?|pytest|fixtures?|conftest)\b", re.I),
    "examples": re.compile(r"\b(?:examples?|samples?|tutorials?)\b", re.I),
    # "why" asks for a rationale, which documentation gives, when it opens a sentence
    # ("Why won't ..."); inside one ("I cannot see why") it asks for nothing
    "docs": re.compile(r"\b(?:docs?|documentation|documented|readme|guide|changelog|changes|release notes?)\b"
                       r"|(?:^|(?<=[.!?]\s)|(?<=\n))\s*why\b", re.I),
    # the same without "why": an issue titled "Why does X fail" complains about code
    "docs-named": re.compile(r"\b(?:docs?|documentation|documented|readme|guide|changelog|changes|release notes?)\b",
                             re.I),
    # a tool's configuration ("what does the typing environment in the tox configuration run")
    "config": re.compile(r"\b(?:config(?:uration)?s?|configured|settings?|tox|doxygen|doxyfile|mkdocs|lint(?:er|ing)?|"
                         r"\w*lintrc)\b", re.I),
    "compat": re.compile(r"\b(?:compat|compatibility|legacy|python ?2|py2)\b", re.I),
    # type declarations (a ``.d.ts``, typings, stubs) and generated code, by name
    "declarations": re.compile(r"\b(?:typings?|type (?:definitions?|declarations?)|d\.ts|stubs?|pyi|"
                               r"(?:shell |tab |zsh |bash |fish )?completions?)\b", re.I),
    "generated": re.compile(r"\b(?:generated|protobuf|proto|codegen|pb2?)\b", re.I),
    "vendored": re.compile(r"\b(?:vendor(?:ed)?|third[- ]party|bundled)\b", re.I),
    # a format's name is no ask ("JSON arrays parse wrongly" is about the parser): its files are
    "data": re.compile(r"\b(?:(?:json|csv|xml|data|sample|input) files?|fixtures?|snapshots?|test data)\b", re.I),
    # the set of options, or where one is declared ("which flags does X take", "where is
    # --verbose defined"); "how are arguments parsed" asks for the parser, not a declaration
    "options": re.compile(r"\b(?:which|what|list|all|available|every)\s+(?:\S+\s+){0,2}(?:options|flags|arguments)\b"
                          r"|\b(?:declares?|declared|declaration|defines?|defined|registers?|registered|adds?|added)"
                          r"\s+(?:\S+\s+){0,3}(?:options?|flags?|arguments?)\b"
                          r"|\b(?:options?|flags?|arguments?)\s+(?:\S+\s+){0,2}(?:declared|defined|registered|added)\b",
                          re.I),
}


def is_test_path(path: str) -> bool:
    """Whether ``path`` is a test file or lies in a tests folder (the test path prior's rule)."""
    return bool(_TEST_FILE.search(path) or _TEST_DIR.search(path))


def path_prior(path: str, asks: frozenset[str]) -> float:
    """The multiplier of a file's chunks (1.0 for implementation files)."""
    factor = 1.0
    if "tests" not in asks and is_test_path(path):
        factor *= STRONG_PRIOR
    if "compat" not in asks and _COMPAT_DIR.search(path):
        factor *= STRONG_PRIOR
    if "examples" not in asks and _EXAMPLES_DIR.search(path):
        factor *= STRONG_PRIOR
    if "docs" not in asks:
        if _META.search(path):
            factor *= STRONG_PRIOR
        elif _DOCS.search(path) or ("config" not in asks and _TOOL_CONFIG.search(path)):
            factor *= DOCS_PRIOR
    if "declarations" not in asks and _DECLARATION.search(path):
        factor *= DECLARATION_PRIOR
    if "generated" not in asks and _GENERATED.search(path):
        factor *= GENERATED_PRIOR
    if "vendored" not in asks and _VENDORED.search(path):
        factor *= VENDORED_PRIOR
    if "data" not in asks and _DATA.search(path):
        factor *= DATA_PRIOR
    if PurePosixPath(path).name == "__init__.py":
        factor *= INIT_PRIOR
    return factor


def asked_for(intent: str, rationale: bool = True) -> frozenset[str]:
    """Which kinds of non-implementation files the words ``intent`` ask for: give it the
    question's own words (:attr:`Query.intent`), not the code or logs pasted into it.
    ``rationale=False``: a sentence opening with "why" does not ask for docs."""
    found = {kind for kind, pattern in _ASKS.items() if pattern.search(intent)}
    if "docs-named" in found or (rationale and "docs" in found):
        found.add("docs")
    else:
        found.discard("docs")
    found.discard("docs-named")
    return frozenset(found)


def asks_of(query: Query) -> frozenset[str]:
    """What ``query`` asks for (:func:`asked_for`): from its own words, and for a pasted
    text (a long question, or one of several lines: an issue's title and body) from its
    first line only, where "why" asks for no docs. An issue's body mentions docs, tests,
    examples, options and changes while reporting a bug in the code ("the docs say X, but
    it does Y"; "my tests fail"); its title says what it is about ("Docs: typo in ..."),
    and a title "Why does X ..." complains about the code."""
    lines = [ln for ln in query.intent.splitlines() if ln.strip()]
    if query.long or len(lines) > 1:
        return asked_for(lines[0] if lines else "", rationale=False)
    return asked_for(query.intent)


def is_pasted(query: Query) -> bool:
    """A pasted text (an issue, a log), not a typed question: long, or several lines."""
    return query.long or sum(1 for ln in query.text.splitlines() if ln.strip()) > 1



def apply_path_priors(cands: dict[str, Candidate], query: Query) -> None:
    """Scale each candidate by :func:`path_prior` of its path for what the question's own
    words ask for (in place)."""
    asks = asks_of(query)
    cache: dict[str, float] = {}
    for c in cands.values():
        if c.path not in cache:
            cache[c.path] = path_prior(c.path, asks)
        c.score *= cache[c.path]


def apply_prose_prior(cands: dict[str, Candidate], query: Query) -> None:
    """The ``prose`` role of :func:`apply_role_priors`: comments and docstrings (in place)."""
    apply_role_priors(cands, query, ("prose",))


def apply_role_priors(cands: dict[str, Candidate], query: Query, roles: Iterable[str] = ("decl", "test")) -> None:
    """Scale each candidate by ``1 - (1 - prior) * share`` for each of ``roles`` (payload
    fields of :data:`ROLE_PRIORS`: ``prose`` the comment and docstring share,
    gitrag.index.chunking.prose; ``decl`` option declarations and ``test`` test code in an
    implementation file, gitrag.index.chunking.roles), unless the question asks for what that
    role is (docs, options, tests) (in place). A named definition still wins: its
    definition boost is several times any fused score."""
    asks = asks_of(query)
    weights = [(role, 1.0 - prior) for role in roles for ask, prior in [ROLE_PRIORS[role]]
               if ask not in asks and not (role in ISSUE_ROLES and is_pasted(query))]
    if not weights:
        return
    for c in cands.values():
        if not c.payload:
            continue
        for role, weight in weights:
            share = c.payload.get(role, 0.0)
            if share:
                c.score *= 1.0 - weight * float(share)


# -- selection --------------------------------------------------------------------------------


def select(cands: dict[str, Candidate], k: int, saturation: bool = True) -> list[Candidate]:
    """The best ``k``, greedily: with ``saturation`` a file's n-th further chunk after
    ``SATURATION_FREE`` is scaled by ``SATURATION_DECAY ** n`` as it is taken, unless it is
    ``named`` (it still counts for the chunks after it). Ties by
    (path, start line, point id). Returns new candidates holding the effective score."""
    ranked = ordered(cands.values())
    if not saturation:
        return [replace(c) for c in ranked[:k]]
    taken: dict[str, int] = {}
    chosen: list[Candidate] = []
    floor = -math.inf
    for c in ranked:
        if len(chosen) >= k and c.score <= floor:
            break  # decay only lowers scores: nothing later can enter
        n = taken.get(c.path, 0)
        excess = 0 if c.named else n - SATURATION_FREE + 1
        chosen.append(replace(c, score=c.score * SATURATION_DECAY**excess if excess > 0 else c.score))
        taken[c.path] = n + 1
        if len(chosen) >= k:
            floor = sorted(x.score for x in chosen)[-k]
    return ordered(chosen)[:k]
