"""Queries over the symbol graph of the current branch: definitions, outlines, dependencies.

The graph is what the chunker records per blob (``symbols`` table, keyed by blob and
``CHUNKER_VERSION``): qualified definitions (``Greeter.greet``, ``Type::method``) and
references (``call``, ``import``, ``inherit``) written as in the source (``self.greet``,
``os.path.join``). The branch's manifest (``files`` table, path -> blob at the indexed
commit) places them in files. Nothing is read from the work tree.

Public API (``ws`` is an open :class:`~gitrag.index.workspace.Workspace`):

* :func:`find_definitions` ``(ws, name, path=None) -> list[Definition]`` — exact
  qualified name first, then definitions whose qualified name *ends with* ``name``
  (``greet`` finds ``Greeter.greet``; ``Type::method`` and ``Type.method`` are the same).
* :func:`file_outline` ``(ws, path) -> list[Definition]`` — a file's definitions in
  source order. Raises :class:`NotFound` for a path the index does not hold.
* :func:`dependencies` ``(ws, symbol, hops=1, path=None) -> dict[str, list[Link]]`` —
  keys ``callees``, ``callers``, ``imports``, ``bases``, ``subclasses``; each edge a
  :class:`Link` with the related :class:`Definition` and how ambiguous it is.

Resolution is by name, not by types: a reference's target resolves to definitions whose
last name segment matches (``self.helper`` -> ``helper``), narrowed to the best tier:
qualified-suffix matches (``Greeter.greet``) over same-class methods (``self.x`` inside
``Greeter``) over the rest, same file first. A target that matches nothing in the index
(a library call) is kept with ``definition=None``. Expect some false edges for common
method names; it is a navigation aid, not a type checker.

Speed: :func:`find_definitions` and :func:`file_outline` read by key (the state's
``symbol_names`` rows of the asked name; one file's graph), so their cost does not grow
with the repository: on sympy (71k chunks) loading the whole graph was 52% of a cold
``ask``. :func:`dependencies` (callers and subclasses need every reference) loads the graph
of one (data dir, branch, indexed commit, chunker version) once into an in-memory
:class:`SymbolIndex`, kept in a small module-level LRU; once loaded, the other queries use
it too. Re-indexing changes the commit and so the key. Every function raises
``NotIndexed`` when the current branch has no index yet.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from gitrag.errors import NotFound as NotFound  # defined there, named here too
from gitrag.errors import NotIndexed
from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.state import graph_text
from gitrag.index.workspace import Workspace

RELATIONS = ("callees", "callers", "imports", "bases", "subclasses")
MAX_HOPS = 5
MAX_LINKS = 200  # per relation, over all hops
FOLLOW_MAX_CANDIDATES = 3  # hops go on only through edges resolved to at most this many definitions
CACHE_SIZE = 8
_SPLIT = re.compile(r"::|->|[.#\\]")
_RECEIVERS = frozenset({"self", "this", "cls", "super()", "super", "Self", "static"})


@dataclass(frozen=True)
class Definition:
    """A definition in the current branch. Lines 1-based, inclusive.

    ``name`` is qualified (``Greeter.greet``); ``parent`` the enclosing definition's
    qualified name ("" at top level); ``kind`` as the chunker says (``function``,
    ``method``, ``class``, ``module``, and ``variable``/``constant`` for module-level
    bindings such as ``g = LocalProxy(...)``); ``language`` the file's language.
    """

    path: str
    start_line: int
    end_line: int
    name: str
    kind: str
    parent: str
    language: str

    @property
    def segments(self) -> tuple[str, ...]:
        return split_name(self.name)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reference:
    """A reference as the chunker recorded it, placed in its file."""

    path: str
    kind: str  # call | import | inherit
    source: str  # qualified name of the enclosing definition, "" at module level
    target: str  # as written
    line: int


@dataclass(frozen=True)
class Link:
    """One edge of the graph seen from the asked symbol.

    ``definition``: the related symbol (callee, caller, imported or base definition,
    subclass); None when it lies outside the index (a library call or import) or, for
    ``callers``, when the call is at module level. ``name``: the target as written
    (callees, imports, bases) or the referencing definition's name (callers, subclasses;
    ``<module>`` at module level). ``path``/``line``: where the reference is written.
    ``hop``: 1 for direct neighbours, 2 for their neighbours, ... ``candidates``: how many
    definitions the reference resolved to (0 outside the index, 1 unambiguous; a caller
    edge with 4 means the call could equally be to 3 other definitions of that name):
    filter on it when precision matters (graph expansion).
    """

    relation: str
    name: str
    path: str
    line: int
    hop: int
    definition: Definition | None
    candidates: int = 1
    how: str = "name"  # callees, bases, imports: the tier that resolved it (SymbolIndex.resolve_how)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "path": self.path, "line": self.line, "hop": self.hop, "candidates": self.candidates,
            "definition": self.definition.to_json() if self.definition else None,
        }


def split_name(name: str) -> tuple[str, ...]:
    """``'a.B::c'`` -> ``('a', 'B', 'c')``; separators ``.``, ``::``, ``->``, ``#``, ``\\``."""
    return tuple(p for p in _SPLIT.split(name.strip()) if p)


def _within(source: str, segments: tuple[str, ...]) -> bool:
    """Whether a reference's ``source`` lies inside the definition with ``segments``."""
    return split_name(source)[: len(segments)] == segments


class SymbolIndex:
    """The in-memory graph of one indexed commit. Build with :func:`symbol_index`."""

    def __init__(self, paths: Iterable[str], definitions: list[Definition], references: list[Reference]) -> None:
        self.paths = frozenset(paths)
        self.definitions = definitions
        self.references = references
        self.by_path: dict[str, list[Definition]] = defaultdict(list)
        self.by_segments: dict[tuple[str, ...], list[Definition]] = defaultdict(list)
        self.by_last: dict[str, list[Definition]] = defaultdict(list)
        self.by_last_lower: dict[str, list[Definition]] = defaultdict(list)
        self._by_site: dict[tuple[str, str], Definition] = {}
        for d in definitions:
            segs = d.segments
            if not segs:
                continue
            self.by_path[d.path].append(d)
            self.by_segments[segs].append(d)
            self.by_last[segs[-1]].append(d)
            self.by_last_lower[segs[-1].lower()].append(d)
            self._by_site.setdefault((d.path, d.name), d)
        for defs in self.by_path.values():
            defs.sort(key=lambda d: (d.start_line, -d.end_line))
        self.refs_by_path: dict[str, list[Reference]] = defaultdict(list)
        self.refs_by_last: dict[tuple[str, str], list[Reference]] = defaultdict(list)
        for r in references:
            self.refs_by_path[r.path].append(r)
            segs = _target_segments(r.target)
            if segs:
                self.refs_by_last[(r.kind, segs[-1])].append(r)

    # -- lookups -------------------------------------------------------------------
    def find(self, name: str, path: str | None = None) -> list[Definition]:
        """Exact qualified matches, then suffix matches, then case-insensitive suffix."""
        q = split_name(name)
        if not q:
            return []
        exact = sorted(self.by_segments.get(q, []), key=_order)
        suffix = [d for d in self.by_last.get(q[-1], []) if len(d.segments) > len(q) and d.segments[-len(q):] == q]
        found = exact + sorted(suffix, key=lambda d: (len(d.segments), *_order(d)))
        if not found:
            low = tuple(s.lower() for s in q)
            found = sorted(
                (d for d in self.by_last_lower.get(low[-1], [])
                 if tuple(s.lower() for s in d.segments[-len(low):]) == low),
                key=lambda d: (len(d.segments), *_order(d)),
            )
        return [d for d in found if path is None or d.path == path]

    def enclosing(self, path: str, source: str) -> Definition | None:
        """The definition named ``source`` in ``path`` (None at module level)."""
        return self._by_site.get((path, source)) if source else None

    def resolve(self, ref: Reference) -> list[Definition]:
        """Definitions a reference may point at, best tier only, same file first."""
        return self.resolve_how(ref)[0]

    def resolve_how(self, ref: Reference) -> tuple[list[Definition], str]:
        """:meth:`resolve` and the tier that matched: ``qualified`` (``Greeter.greet``),
        ``class`` (``self.x`` inside the class), ``module`` (``utils.make()`` in utils.py) or
        ``name`` (the last name segment alone: nothing else in the text narrows it)."""
        segs = _target_segments(ref.target)
        if not segs:
            return [], "name"
        cands = self.by_last.get(segs[-1], [])
        if not cands:
            return [], "name"
        if len(segs) > 1:
            qualified = [d for d in cands if d.segments[-len(segs):] == segs]
            if qualified:
                return _near(qualified, ref.path), "qualified"
        enclosing = self.enclosing(ref.path, ref.source)
        receiver = _receiver(ref.target)
        if receiver and enclosing is not None:
            cls = _class_of(enclosing, self)
            scope = self.ancestors(cls, ref.path) if receiver.startswith("super") else [cls]
            same = [d for d in cands if cls and d.parent in scope]
            if same:
                return _near(same, ref.path), "class"
        if len(segs) > 1:  # module-qualified call: utils.make() prefers utils.py
            stems = set(segs[:-1])
            by_module = [d for d in cands if _stem(d.path) in stems]
            if by_module:
                return _near(by_module, ref.path), "module"
        return _near(cands, ref.path), "name"

    def ancestors(self, cls: str, path: str, limit: int = 10) -> list[str]:
        """Qualified names of the base classes of ``cls`` (defined in ``path``), nearest first."""
        out: list[str] = []
        todo = [d for d in self.by_segments.get(split_name(cls), []) if d.path == path][:1]
        while todo and len(out) < limit:
            d = todo.pop(0)
            for r in self.outgoing(d, "inherit"):
                if split_name(r.source) != d.segments:
                    continue
                for base in self.resolve(r)[:1]:
                    if base.name not in out:
                        out.append(base.name)
                        todo.append(base)
        return out

    # -- relations -------------------------------------------------------------------
    def outgoing(self, d: Definition, kind: str) -> list[Reference]:
        """References of ``kind`` written inside ``d`` (nested definitions included)."""
        segs = d.segments
        return [r for r in self.refs_by_path.get(d.path, []) if r.kind == kind and r.source and _within(r.source, segs)]

    def incoming(self, d: Definition, kind: str) -> list[tuple[Reference, int]]:
        """References of ``kind`` anywhere that resolve to ``d``, with their candidate counts."""
        out = []
        for r in self.refs_by_last.get((kind, d.segments[-1]), []):
            targets = self.resolve(r)
            if d in targets:
                out.append((r, len(targets)))
        return out

    def imports_used_by(self, d: Definition) -> list[Reference]:
        """Imports inside ``d``, plus module-level imports of its file whose name ``d`` uses."""
        used: set[str] = set()
        for kind in ("call", "inherit"):
            for r in self.outgoing(d, kind):
                used.update(_target_segments(r.target))
        out = []
        for r in self.refs_by_path.get(d.path, []):
            if r.kind != "import":
                continue
            inside = bool(r.source) and _within(r.source, d.segments)
            segs = _target_segments(r.target)
            if inside or (not r.source and segs and segs[-1] in used):
                out.append(r)
        return out


def _order(d: Definition) -> tuple[str, int]:
    return d.path, d.start_line


def _near(defs: list[Definition], path: str) -> list[Definition]:
    return sorted(defs, key=lambda d: (d.path != path, *_order(d)))


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.split(".", 1)[0]


def _target_segments(target: str) -> tuple[str, ...]:
    """A reference target without call parentheses and receivers: ``self.a.b()`` -> (a, b)."""
    cleaned = re.sub(r"\([^()]*\)", "()", target.strip())
    segs = [s for s in split_name(cleaned) if s not in _RECEIVERS]
    return tuple(s.removesuffix("()") for s in segs if s.removesuffix("()"))


def _receiver(target: str) -> str:
    """``self``/``this``/``super()``... when ``target`` starts with one, else ""."""
    first = split_name(re.sub(r"\([^()]*\)", "()", target.strip()))[:1]
    return first[0] if first and first[0] in _RECEIVERS else ""


def _class_of(d: Definition, index: SymbolIndex) -> str:
    """The qualified name of the nearest class-like definition enclosing ``d`` (or ``d``
    itself): what ``self``/``this`` means inside ``d``. "" for a plain function."""
    seen = 0
    cur: Definition | None = d
    while cur is not None and cur.kind in ("method", "function") and seen < 50:
        cur = index.enclosing(cur.path, cur.parent)
        seen += 1
    return cur.name if cur is not None else ""


# -- loading and caching -------------------------------------------------------------------

_cache: OrderedDict[tuple[str, str, str, str], SymbolIndex] = OrderedDict()
_cache_lock = threading.Lock()


def _key(ws: Workspace, branch_name: str | None = None) -> tuple[str, str, str, str]:
    """(data dir, branch, indexed commit, chunker version) of the current branch (or of the
    view ``branch_name``: another branch, a revision view); raises NotIndexed when it has no
    index yet. A first sync not finished (under way, or interrupted: no indexed commit yet)
    answers from the files it wrote so far, keyed ``partial:<files written>`` so each batch
    it adds is read again (the store answers from the same points: gitrag.query.retrieval)."""
    name = branch_name or ws.repo.branch()
    branch = ws.state.branch(name)
    if branch is not None and branch.indexed_commit is None and (done := ws.state.file_count(name)):
        return (str(ws.data_dir), name, f"partial:{done}", CHUNKER_VERSION)
    if branch is None or branch.indexed_commit is None:
        raise NotIndexed(f"branch {name!r} is not indexed yet; run `gitrag index` first")
    return (str(ws.data_dir), name, branch.indexed_commit, CHUNKER_VERSION)


def _loaded(key: tuple[str, str, str, str]) -> SymbolIndex | None:
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    return None


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any, size: int) -> None:
    with _cache_lock:
        cache[key] = value
        while len(cache) > size:
            cache.popitem(last=False)


def symbol_index(ws: Workspace, branch_name: str | None = None) -> SymbolIndex:
    """The graph of the current branch (or of the view ``branch_name``: another branch, a
    revision view) at its indexed commit, cached (LRU of ``CACHE_SIZE``).

    Raises NotIndexed when the branch has no index yet."""
    key = _key(ws, branch_name)
    name = key[1]
    got = _loaded(key)
    if got is not None:
        return got
    index = _load(ws, name)
    with _cache_lock:
        _cache[key] = index
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return index


def _load(ws: Workspace, branch: str) -> SymbolIndex:
    rows = ws.state.db.execute(
        "SELECT f.path, s.variant, s.data FROM files f JOIN symbols s ON s.blob = f.blob "
        "WHERE f.branch = ? AND f.skip_reason IS NULL ORDER BY f.path, s.variant = ? DESC",
        (branch, CHUNKER_VERSION),
    ).fetchall()
    paths = [p for p, f in ws.state.files(branch).items() if f.skip_reason is None]
    defs: list[Definition] = []
    refs: list[Reference] = []
    seen: set[str] = set()
    for path, _variant, data in rows:
        if path in seen:  # a row of an older chunker version when the current one exists
            continue
        seen.add(path)
        graph = json.loads(graph_text(data))
        defs += _definitions(path, graph)
        for r in graph.get("references", []):
            refs.append(Reference(path, str(r["kind"]), str(r.get("source", "")), str(r["target"]), int(r["line"])))
    return SymbolIndex(paths, defs, refs)


def _definitions(path: str, graph: dict[str, Any]) -> list[Definition]:
    lang = str(graph.get("language", ""))
    return [Definition(path, int(d["start_line"]), int(d["end_line"]), str(d["name"]), str(d.get("kind", "")),
                       str(d.get("parent", "")), lang) for d in graph.get("definitions", [])]


def clear_cache() -> None:
    """Forget every cached graph (tests; a long-lived process after a rebuild)."""
    with _cache_lock:
        _cache.clear()
        _named.clear()
        _paths.clear()


#: definitions read by key, per (graph key, name key): a warm daemon asks the same names again
_named: OrderedDict[tuple[Any, ...], SymbolIndex] = OrderedDict()
_paths: OrderedDict[tuple[str, str, str, str], frozenset[str]] = OrderedDict()
NAMED_CACHE_SIZE = 512


def _named_index(ws: Workspace, key: tuple[str, str, str, str], name_key: str) -> SymbolIndex:
    """A :class:`SymbolIndex` of the branch's definitions whose last name segment is
    ``name_key`` (lower-cased): all that :meth:`SymbolIndex.find` of such a name reads."""
    at = (*key, name_key)
    with _cache_lock:
        if at in _named:
            _named.move_to_end(at)
            return _named[at]
    rows = ws.state.definitions_named(key[1], [name_key], CHUNKER_VERSION)
    defs = [Definition(path, int(start), int(end), str(name), str(kind), str(parent), str(lang))
            for path, name, kind, parent, start, end, lang in rows]
    index = SymbolIndex((), defs, [])
    _remember(_named, at, index, NAMED_CACHE_SIZE)
    return index


def branch_paths(ws: Workspace, branch: str | None = None) -> frozenset[str]:
    """The current branch's (or the view ``branch``'s) indexed (not skipped) paths at its
    indexed commit, cached."""
    key = _key(ws, branch)
    whole = _loaded(key)
    if whole is not None:
        return whole.paths
    with _cache_lock:
        if key in _paths:
            _paths.move_to_end(key)
            return _paths[key]
    paths = frozenset(ws.state.indexed_paths(key[1]))
    _remember(_paths, key, paths, CACHE_SIZE)
    return paths


# -- public queries -------------------------------------------------------------------


def find_definitions(ws: Workspace, name: str, path: str | None = None, branch: str | None = None) -> list[Definition]:
    """Definitions named ``name`` in the current branch, best first; [] when there is none.

    ``name`` may be qualified with any separator (``Greeter.greet``, ``Greeter::greet``)
    or bare (``greet``). Order: exact qualified matches (by path, line), then definitions
    whose qualified name ends with ``name`` (shorter names first), and only when neither
    exists, the same suffix match ignoring case. ``path`` keeps only that file's.

    Reads the definitions of ``name``'s last segment by key (or the whole graph, when it
    is loaded already or the state has no ``symbol_names``)."""
    key = _key(ws, branch)
    whole = _loaded(key)
    segments = split_name(name)
    if whole is not None or not segments or not ws.state.symbol_names_ready:
        return (whole or symbol_index(ws, branch)).find(name, path)
    return _named_index(ws, key, segments[-1].lower()).find(name, path)


def file_outline(ws: Workspace, path: str, branch: str | None = None) -> list[Definition]:
    """The definitions of ``path`` (repository-relative, ``/``-separated) in source order;
    nesting is given by ``parent``. [] for an indexed file without definitions (text,
    a language without a grammar). ``branch``: another view than the current branch's.
    Raises NotFound when the path is not indexed. Reads that one file's graph."""
    key = _key(ws, branch)
    whole = _loaded(key)
    if whole is not None:
        found, defs = path in whole.paths, list(whole.by_path.get(path, []))
    else:
        found, text = ws.state.file_symbols(key[1], path, CHUNKER_VERSION)
        defs = SymbolIndex((), _definitions(path, json.loads(text)), []).by_path.get(path, []) if text else []
    if not found:
        raise NotFound(
            f"{path!r} is not in the index of branch {branch or ws.repo.branch()!r} (not tracked, skipped or not "
            f"indexed yet)"
        )
    return list(defs)


def dependencies(
    ws: Workspace, symbol: str | Definition, hops: int = 1, path: str | None = None
) -> dict[str, list[Link]]:
    """The neighbourhood of ``symbol`` in the symbol graph, up to ``hops`` (1..5) edges away.

    ``symbol`` is a name as for :func:`find_definitions` (its exact matches if any, else
    all suffix matches; ``path`` narrows to one file) or a :class:`Definition`. Returns
    ``{"callees", "callers", "imports", "bases", "subclasses"}``, each a list of
    :class:`Link`, at most ``MAX_LINKS`` each, one per (name, file, definition), ordered by
    hop, then least ambiguous first (``candidates``), then position. Each relation is
    followed transitively in its own direction (callees of callees, callers of callers,
    bases of bases, ...) through edges with at most ``FOLLOW_MAX_CANDIDATES`` candidates;
    imports are direct only. An unknown symbol gives empty lists."""
    index = symbol_index(ws)
    starts = [symbol] if isinstance(symbol, Definition) else _starts(index, symbol, path)
    hops = max(1, min(int(hops), MAX_HOPS))
    out: dict[str, list[Link]] = {rel: [] for rel in RELATIONS}
    for rel in RELATIONS:
        out[rel] = _walk(index, starts, rel, 1 if rel == "imports" else hops)
    return out


def _starts(index: SymbolIndex, name: str, path: str | None) -> list[Definition]:
    found = index.find(name, path)
    exact = [d for d in found if d.segments == split_name(name)]
    return exact or found


def _walk(index: SymbolIndex, starts: list[Definition], rel: str, hops: int) -> list[Link]:
    links: list[Link] = []
    seen_defs = set(starts)
    seen_links: set[tuple[Any, ...]] = set()
    frontier = list(starts)
    for hop in range(1, hops + 1):
        found: list[Link] = []
        for d in frontier:
            for link in _step(index, d, rel, hop):
                key = (link.name, link.path, link.definition)
                if key not in seen_links:
                    seen_links.add(key)
                    found.append(link)
        found.sort(key=lambda link: (max(link.candidates, 1), link.path, link.line))
        frontier = []
        for link in found[: MAX_LINKS - len(links)]:
            links.append(link)
            target = link.definition
            if target is not None and target not in seen_defs and link.candidates <= FOLLOW_MAX_CANDIDATES:
                seen_defs.add(target)
                frontier.append(target)
        if not frontier or len(links) >= MAX_LINKS:
            break
    return links


def _step(index: SymbolIndex, d: Definition, rel: str, hop: int) -> Iterable[Link]:
    if rel in ("callees", "bases", "imports"):
        kind = {"callees": "call", "bases": "inherit", "imports": "import"}[rel]
        refs = index.imports_used_by(d) if rel == "imports" else index.outgoing(d, kind)
        for r in refs:
            targets, how = index.resolve_how(r)
            shown: list[Definition | None] = [*targets[:5]] or [None]
            for t in shown:
                yield Link(rel, r.target, r.path, r.line, hop, t, len(targets), how)
    else:
        kind = "call" if rel == "callers" else "inherit"
        for r, n in index.incoming(d, kind):
            src = index.enclosing(r.path, r.source)
            yield Link(rel, r.source or "<module>", r.path, r.line, hop, src, n)
