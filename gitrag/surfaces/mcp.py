"""``gitrag mcp``: the index of one repository as MCP tools for coding agents (stdio).

    agent --stdio JSON-RPC--> MCPServer (official ``mcp`` SDK) --> :class:`Tools` --> Workspace

The workspace's state (the symbol graph, freshness) is opened once for ``--repo``; searches
go through the gitrag daemon, which this server starts when none runs: the daemon is the
one process that opens the store (an embedded shard can be open in one process at a
time), so several MCP servers, CLI commands and the hooks' syncs share it and never lock
each other out. Tools run on SDK worker threads, one at a time (a lock around the workspace).

Every result carries the index's freshness: ``branch``, ``commit`` (the indexed commit
answered from), ``head``, ``up_to_date``, ``worktree_changes``. Source text comes from git
blobs of the indexed commit, except the work-tree results of ``search_code`` and
``find_related`` (``source: "worktree"``, gitrag.query.worktree: read from those files), never
from outside the repository; paths
given by the agent must be repository-relative (absolute paths and ``..`` are refused).
Failures come back as tool errors (``is_error``) carrying gitrag's one-line message;
the server itself never stops on a tool failure.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer  # mcp >= 2 (FastMCP of 1.x, renamed)
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from gitrag import __version__
from gitrag.daemon import launch, revive, routing
from gitrag.errors import EXIT_OK, GitragError
from gitrag.errors import ToolInputError as ToolInputError  # defined there, named here too
from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.chunking.languages import LANGUAGES
from gitrag.index.store import SearchFilter
from gitrag.index.symbols import (
    RELATIONS,
    Definition,
    NotFound,
    dependencies,
    file_outline,
    find_definitions,
    symbol_index,
)
from gitrag.index.workspace import Workspace, open_workspace
from gitrag.query.results import MAX_K
from gitrag.query.retrieval import Freshness, freshness

log = logging.getLogger("gitrag.mcp")
T = TypeVar("T")

MAX_SNIPPET_LINES = 200  # a definition's snippet is cut after this many lines
MAX_DEFINITIONS = 10  # get_symbol returns at most this many matches
MAX_LINKS = 50  # per relation in get_symbol_dependencies

INSTRUCTIONS = """gitrag indexes this git repository's committed code (per branch) for \
semantic + keyword search and keeps a symbol graph. Use search_code to find code by what \
it does or by identifiers, get_symbol to jump to a definition by name, \
get_symbol_dependencies for callers/callees/imports/bases/subclasses, get_file_outline \
for a file's definitions, index_status to see whether the index is current. Lines are \
1-based and inclusive. search_code also searches uncommitted work-tree edits (results marked \
source 'worktree'; committed=true turns that off); the other tools answer from the indexed commit: \
when up_to_date is false or worktree_changes > 0, recent edits are not in them."""


def clean_path(path: str, *, prefix: bool = False) -> str:
    """A repository-relative ``/`` path without ``./`` or doubled slashes.

    Raises ToolInputError for absolute paths, ``..`` segments, NUL bytes, and (unless
    ``prefix``) an empty path. With ``prefix`` a trailing ``/`` is kept."""
    raw = path.strip()
    if "\0" in raw:
        raise ToolInputError("paths may not contain NUL bytes")
    if raw.startswith(("/", "\\", "~")) or (len(raw) > 1 and raw[1] == ":"):
        raise ToolInputError(f"{path!r} is absolute; give a path relative to the repository root, like 'src/app.py'")
    parts = [p for p in raw.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolInputError(f"{path!r} leaves the repository ('..'); give a path relative to the repository root")
    if not parts and not prefix:
        raise ToolInputError("an empty path; give a path relative to the repository root, like 'src/app.py'")
    out = "/".join(parts)
    return out + "/" if prefix and out and raw.endswith("/") else out


def _language(value: str) -> str:
    """A tool's ``language``, lower-cased; ToolInputError listing the known names when files are
    never indexed as it (as ``gitrag ask --lang`` says it)."""
    lang = value.strip().lower()
    if lang and lang not in LANGUAGES:
        raise ToolInputError(f"unknown language {value!r}; known: {', '.join(LANGUAGES)}")
    return lang


_FRESH_FIELDS = ("branch", "commit", "head", "up_to_date", "worktree_changes")


def fresh_fields(f: Freshness) -> dict[str, Any]:
    """The freshness fields every tool result carries."""
    return {"branch": f.branch, "commit": f.commit, "head": f.head, "up_to_date": f.up_to_date,
            "worktree_changes": f.worktree_changes}


class Tools:
    """The tool implementations over one open workspace. Each public method returns a
    JSON-able dict or raises GitragError (one-line message)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.lock = threading.Lock()

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` under the workspace lock, errors turned into tool errors."""
        with self.lock:
            try:
                return fn(*args)
            except GitragError as exc:
                raise ToolError(str(exc)) from None
            except Exception as exc:  # a bug: report it, keep serving
                log.exception("tool failed")
                raise ToolError(f"internal error in gitrag: {exc!r}; please report it") from None

    def warm_up(self) -> None:
        """Load the symbol graph now, so the first call is fast (the daemon, which holds the
        model, is started by the first search that needs it)."""
        with self.lock:
            try:
                symbol_index(self.ws)
            except Exception as exc:  # noqa: BLE001 - not indexed yet: the tools will say so
                log.info("warm-up skipped: %s", exc)

    # -- tools -------------------------------------------------------------------------
    def search_code(self, query: str, k: int, mode: str, path_prefix: str, language: str,
                    exclude: Sequence[str] = (), files: bool = False, offset: int = 0,
                    committed: bool = False, rev: str = "") -> dict[str, Any]:
        if "\0" in query:  # the daemon's protocol refuses it too, in its own words
            raise ToolInputError(f"the query holds a NUL character (character {query.index(chr(0)) + 1:,}); "
                                 "a query is text: remove it")
        prefix = clean_path(path_prefix, prefix=True) if path_prefix else ""
        globs = tuple(exclude)
        lang = _language(language)
        SearchFilter(prefix, lang, globs)  # checks the globs before anything is sent
        routed = self._ask_daemon(query, k, mode, prefix, lang, globs, files, worktree=not committed, offset=offset,
                                  rev=rev.strip())
        results, fresh = routed.response.results, routed.response.freshness
        if prefix and not results:
            self._no_such_prefix(fresh.commit, prefix)
        keep = ("path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet", "source")
        out = {"query": query, "mode": mode, **fresh_fields(fresh), "offset": offset, "revision": rev.strip() or None,
               "results": [{key: getattr(r, key) for key in keep} for r in results]}
        if files:
            out["files"] = [h.to_json() for h in routed.response.files or []]
        if routed.catching_up:
            out["catching_up"] = routed.catching_up
        return out

    def _ask_daemon(self, query: str, k: int, mode: str, prefix: str, language: str,
                    exclude: tuple[str, ...] = (), files: bool = False, **more: Any) -> routing.Routed:
        """Search through the daemon, starting it when none runs. The daemon is the one
        process that opens the store (an embedded shard is open in one process at a time),
        so several MCP servers and CLI commands never lock each other out."""
        for _ in range(3):  # a daemon may stop between our start and our request (idle, `--stop`)
            routed = routing.ask(str(self.ws.repo.root), query, k, mode, prefix, language, True,
                                 exclude=exclude, files=files, **more)
            if routed is not None:
                return routed
            revive.start()  # as install does: the systemd service when gitrag's unit is installed
        raise GitragError("the gitrag daemon went away three times while answering; see its log "
                          f"({launch.log_path()})")

    def find_related(self, path: str, line: int, k: int, path_prefix: str, language: str,
                     committed: bool = False, offset: int = 0) -> dict[str, Any]:
        """The chunks most like the one at ``path``:``line`` (gitrag.query.related), through the daemon."""
        clean = clean_path(path)
        prefix = clean_path(path_prefix, prefix=True) if path_prefix else ""
        args = {"location": f"{clean}:{line}", "k": k, "path": prefix, "lang": _language(language),
                "exclude": [], "worktree": not committed, "offset": offset}
        for _ in range(3):
            data = routing.related(str(self.ws.repo.root), **args)
            if data is not None:
                if prefix and not data["results"]:
                    self._no_such_prefix(data["commit"], prefix)
                keep = ("path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet", "source")
                out = {"location": args["location"], **{f: data[f] for f in _FRESH_FIELDS}, "offset": offset,
                       "located": {key: data["located"][key] for key in keep},
                       "results": [{key: r[key] for key in keep} for r in data["results"]]}
                return out
            revive.start()  # as install does: the systemd service when gitrag's unit is installed
        raise GitragError("the gitrag daemon went away three times while answering; see its log "
                          f"({launch.log_path()})")

    def _revision(self, rev: str) -> tuple[str | None, Freshness]:
        """(the view to read, its freshness): the current branch's, or with ``rev`` that
        revision's view, which the daemon builds first when it is missing (an incremental
        sync; this server never writes the store itself)."""
        rev = rev.strip()
        if not rev:
            return None, freshness(self.ws)
        from gitrag.query import revisions

        commit = revisions.resolve(self.ws, rev)
        view = revisions.view_name(commit)
        row = self.ws.state.branch(view)
        if row is None or row.indexed_commit != commit:
            self._ask_daemon(rev, 1, "sparse", "", "", rev=rev)  # builds the view
        return view, Freshness(self.ws.repo.branch(), commit, commit, 0)

    def get_symbol(self, name: str, rev: str = "") -> dict[str, Any]:
        view, fresh = self._revision(rev)
        found = self._definitions(name, view)
        out = {"query": name, **fresh_fields(fresh), "total": len(found),
               "definitions": [self._with_snippet(d, view) for d in found[:MAX_DEFINITIONS]]}
        if view:
            out["revision"] = rev.strip()
        return out

    def get_symbol_dependencies(self, symbol: str, hops: int) -> dict[str, Any]:
        found = self._definitions(symbol)
        deps = dependencies(self.ws, symbol, hops=hops)
        out: dict[str, Any] = {"query": symbol, "hops": hops, **fresh_fields(freshness(self.ws)),
                               "definitions": [d.to_json() for d in found[:MAX_DEFINITIONS]]}
        for rel in RELATIONS:
            out[rel] = [link.to_json() for link in deps[rel][:MAX_LINKS]]
            if len(deps[rel]) > MAX_LINKS:
                out[f"{rel}_omitted"] = len(deps[rel]) - MAX_LINKS
        return out

    def get_file_outline(self, path: str, rev: str = "") -> dict[str, Any]:
        clean = clean_path(path)
        view, fresh = self._revision(rev)
        outline = file_outline(self.ws, clean, view)
        out = {"path": clean, **fresh_fields(fresh), "definitions": [d.to_json() for d in outline]}
        if view:
            out["revision"] = rev.strip()
        return out

    def index_status(self) -> dict[str, Any]:
        ws = self.ws
        f = freshness(ws)
        branch = ws.state.branch(f.branch)
        files = ws.state.files(f.branch) if branch else {}
        indexed = sum(1 for row in files.values() if row.skip_reason is None)
        out = {"repo": str(ws.repo.root), **fresh_fields(f), "indexed": branch is not None and f.commit is not None,
               "files_indexed": indexed, "files_skipped": len(files) - indexed,
               "chunks": ws.state.point_count(f.branch) if branch else 0, "embedder": ws.settings.embedder,
               "store": ws.settings.store_kind, "chunker_version": CHUNKER_VERSION}
        busy = self._catching_up() if not (out["indexed"] and f.up_to_date) else None
        if busy:
            out["catching_up"] = busy
            out["hint"] = f"{busy}; ask again in a moment"
        elif not out["indexed"]:
            out["hint"] = "this branch is not indexed; run `gitrag index` in the repository"
        elif not f.up_to_date:
            out["hint"] = "HEAD moved since the last index; run `gitrag index` (or install the hooks: `gitrag install`)"
        return out

    def _catching_up(self) -> str | None:
        """What a running daemon is doing to bring this work tree to HEAD (``the daemon is
        indexing it now (embedding chunks: 40 of 200)``), or None (no daemon, not on it).
        Asked over the socket without starting a daemon."""
        info = routing.progress(str(self.ws.repo.root))
        busy = info.get("catching_up") if info else None
        return busy if isinstance(busy, str) and busy else None

    # -- helpers -------------------------------------------------------------------------
    def _no_such_prefix(self, commit: str | None, prefix: str) -> None:
        """Raise ToolInputError when no file of ``commit``'s tree starts with ``prefix`` (the
        nearest prefixes named, gitrag.query.prefixes): an empty list is not an answer to a typo."""
        from gitrag.query import prefixes

        try:
            paths = [e.path for e in self.ws.repo.files(commit)] if commit else None
        except Exception:  # noqa: BLE001 - a tree not here (a team answer's commit): the empty answer stands
            paths = None
        said = prefixes.unmatched(paths, prefix, f"path_prefix {prefix!r}") if paths is not None else None
        if said:
            raise ToolInputError(said)

    def _definitions(self, name: str, view: str | None = None) -> list[Definition]:
        found = find_definitions(self.ws, name, branch=view)
        if not found:
            raise NotFound(f"no definition named {name!r} in the index of branch {view or self.ws.repo.branch()!r}; "
                           f"search_code finds code by description or identifier")
        return found

    def _with_snippet(self, d: Definition, view: str | None = None) -> dict[str, Any]:
        """``d`` as JSON with its source lines read from the indexed blob."""
        out = d.to_json()
        row = self.ws.state.files(view or self.ws.repo.branch()).get(d.path)
        text = self.ws.repo.read_blob(row.blob).decode("utf-8", "replace") if row else ""
        lines = text.splitlines()[d.start_line - 1 : d.end_line]
        out["snippet"] = "\n".join(lines[:MAX_SNIPPET_LINES])
        out["snippet_truncated"] = len(lines) > MAX_SNIPPET_LINES
        return out


# -- the server --------------------------------------------------------------------------------

_QUERY = "What to find: a question, a description of behaviour, or identifiers."
_PREFIX = "Only paths starting with this repository-relative prefix, e.g. 'src/net/'."
_LANGUAGE = "Only this language, e.g. 'python', 'go', 'rust', 'markdown'."
_EXCLUDE = ("Leave out paths matching these gitignore-style globs, e.g. ['docs/**', '*.md', 'tests/']; "
            "k results still come back when k others exist.")
_FILES = ("Also return files: the top k files, best first, each {path, language, score (its best chunk's), "
          "matches (its chunks among the candidates), chunks: [{start_line, end_line, symbol, kind, score}] "
          "(its best 3)}: which files to open.")
_OFFSET = "Skip this many of the best results: offset=10 with k=10 gives results 11-20 of the same ranking."
_COMMITTED = ("Search the indexed commit only. By default uncommitted work-tree changes are searched too: edited and "
              "new files answer with their code on disk (source 'worktree'), deleted ones no longer answer.")
_REV = ("Answer from this revision's tree instead (a tag, a commit, 'HEAD~20'); the first use of a revision builds "
        "its view from the nearest indexed commit (embedding only chunks never seen). commit then names it.")
_NAME = "A function, method, class or type name, bare or qualified."
_PATH = "Repository-relative path with '/' separators, e.g. 'src/app/core.py'."
_READ_ONLY: dict[str, Any] = {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}
_FRESH = ("Every result also has branch, commit (indexed commit), head, up_to_date and worktree_changes.")


def argument_error(tool: str, exc: ValidationError) -> str:
    """One line for arguments that fail a tool's schema, in gitrag's words: which
    argument, what is wrong (pydantic's message), never the rejected value's dump.

    ``Error executing tool search_code: argument 'k': Input should be greater than or
    equal to 1; argument 'query' is required``"""
    problems = []
    for err in exc.errors():
        name = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
        if err.get("type") == "missing":
            problems.append(f"argument {name!r} is required")
        else:
            problems.append(f"argument {name!r}: {' '.join(str(err.get('msg', 'is invalid')).split())}")
    return f"Error executing tool {tool}: " + "; ".join(problems or ["invalid arguments"])


class _Server(MCPServer):
    """The SDK's server with argument errors as gitrag's one-line messages (the SDK puts
    pydantic's multi-line report, with the input dumped, into the tool error), and replies
    flushed when stdin closes."""

    async def run_stdio_async(self) -> None:
        """As the SDK's, but stdin's end waits for the replies to the requests already received
        (gitrag.surfaces.mcp_drain): the SDK cancelled them, and their replies were lost."""
        from gitrag.surfaces import mcp_drain

        await mcp_drain.serve_stdio(self._lowlevel_server)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        props = list(tool.parameters.get("properties", {})) if tool is not None else []
        unknown = sorted(set(arguments) - set(props)) if tool is not None else []
        if unknown:  # the schema says additionalProperties: false; the SDK would drop them unsaid
            known = ", ".join(props) or "none"
            raise ToolError(f"Error executing tool {name}: " + "; ".join(
                f"unknown argument {a!r}" for a in unknown) + f" (known: {known})")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argument_error(name, exc.__cause__)) from exc.__cause__
            raise


def build_server(tools: Tools) -> MCPServer:
    """An MCPServer exposing ``tools`` as search_code, find_related, get_symbol, get_symbol_dependencies,
    get_file_outline and index_status."""
    server = _Server("gitrag", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    @server.tool(name="search_code", annotations=_annotations("Search code"), description=(
        "Search the repository's indexed code by meaning and by identifiers (hybrid: embeddings + BM25, "
        "fused by RRF). Returns up to k results, best first: {path, start_line, end_line (1-based, inclusive), "
        "symbol (qualified name like Class.method), kind, language, score, snippet (source text), source ('index': "
        "the indexed commit, 'worktree': an uncommitted file on disk)}; with files=true "
        "also files (ranked files with their best chunks). " + _FRESH))
    def search_code(
        query: Annotated[str, Field(description=_QUERY, min_length=1)],
        k: Annotated[int, Field(description="Number of results.", ge=1, le=MAX_K)] = 10,
        mode: Annotated[Literal["hybrid", "dense", "sparse"], Field(
            description="hybrid (default) fuses dense and sparse; dense = embeddings only; sparse = BM25 terms only "
                        "(best for exact identifiers).")] = "hybrid",
        path_prefix: Annotated[str, Field(description=_PREFIX)] = "",
        language: Annotated[str, Field(description=_LANGUAGE)] = "",
        exclude: Annotated[list[str], Field(description=_EXCLUDE)] = [],  # noqa: B006 - never mutated
        files: Annotated[bool, Field(description=_FILES)] = False,
        offset: Annotated[int, Field(description=_OFFSET, ge=0, le=10_000)] = 0,
        committed: Annotated[bool, Field(description=_COMMITTED)] = False,
        rev: Annotated[str, Field(description=_REV)] = "",
    ) -> dict[str, Any]:
        return tools.run(tools.search_code, query, k, mode, path_prefix, language, exclude, files, offset, committed,
                         rev)

    @server.tool(name="find_related", annotations=_annotations("Find related code"), description=(
        "Code most like the chunk at path:line (that chunk left out): a copy under another name, code doing "
        "the same elsewhere, sibling implementations. Returns {location, located (the chunk at that line), "
        "results: [{path, start_line, end_line, symbol, kind, language, score, snippet, source}]} best first. "
        "Uncommitted work-tree files are searched too, and path is read from disk when it is one "
        "(committed=true: the indexed commit only). " + _FRESH))
    def find_related(
        path: Annotated[str, Field(description=_PATH, min_length=1)],
        line: Annotated[int, Field(description="A line of the chunk, 1-based.", ge=1)],
        k: Annotated[int, Field(description="Number of results.", ge=1, le=MAX_K)] = 10,
        path_prefix: Annotated[str, Field(description=_PREFIX)] = "",
        language: Annotated[str, Field(description=_LANGUAGE)] = "",
        committed: Annotated[bool, Field(description=_COMMITTED)] = False,
        offset: Annotated[int, Field(description=_OFFSET, ge=0, le=10_000)] = 0,
    ) -> dict[str, Any]:
        return tools.run(tools.find_related, path, line, k, path_prefix, language, committed, offset)

    @server.tool(name="get_symbol", annotations=_annotations("Get symbol definition"), description=(
        "Find definitions by name: exact qualified name first ('Greeter.greet', 'Type::method'), then "
        "definitions whose qualified name ends with it ('greet'). Returns {definitions: [{path, start_line, "
        f"end_line, name, kind, parent, language, snippet}}], total}} (at most {MAX_DEFINITIONS}). " + _FRESH))
    def get_symbol(
        name: Annotated[str, Field(description=_NAME, min_length=1)],
        rev: Annotated[str, Field(description=_REV)] = "",
    ) -> dict[str, Any]:
        return tools.run(tools.get_symbol, name, rev)

    @server.tool(name="get_symbol_dependencies", annotations=_annotations("Get symbol dependencies"), description=(
        "The symbol's neighbourhood in the code graph: callees (what it calls), callers (who calls it), "
        "imports (imports it uses), bases and subclasses, each followed up to `hops` steps. Each item: "
        "{name (as written, or the caller's name), path, line (where the reference is), hop, candidates (how "
        "many definitions the name could mean; 1 = unambiguous), definition ({path, start_line, end_line, name, "
        "kind, parent, language}) or null when it is outside the repository}. Resolution is by name, so prefer "
        "edges with few candidates; they come first. " + _FRESH))
    def get_symbol_dependencies(
        symbol: Annotated[str, Field(description="A name as for get_symbol, e.g. 'Greeter.greet'.", min_length=1)],
        hops: Annotated[int, Field(description="How many edges to follow (1 = direct neighbours).", ge=1, le=3)] = 1,
    ) -> dict[str, Any]:
        return tools.run(tools.get_symbol_dependencies, symbol, hops)

    @server.tool(name="get_file_outline", annotations=_annotations("Get file outline"), description=(
        "The definitions of one file in source order: {path, definitions: [{path, start_line, end_line, name, "
        "kind, parent, language}]}; nesting is given by parent. " + _FRESH))
    def get_file_outline(
        path: Annotated[str, Field(description=_PATH, min_length=1)],
        rev: Annotated[str, Field(description=_REV)] = "",
    ) -> dict[str, Any]:
        return tools.run(tools.get_file_outline, path, rev)

    @server.tool(name="index_status", annotations=_annotations("Index status"), description=(
        "Whether the index of the checked-out branch is current: {repo, branch, commit (indexed), head, "
        "up_to_date, worktree_changes, indexed, files_indexed, files_skipped, chunks, embedder, store, "
        "chunker_version, hint (what to run when it is stale, or that the daemon is indexing it now), "
        "catching_up (only while a running daemon brings it to HEAD: what it is doing, e.g. 'the daemon is "
        "indexing it now (embedding chunks: 40 of 200)')}."))
    def index_status() -> dict[str, Any]:
        return tools.run(tools.index_status)

    for tool in server._tool_manager.list_tools():  # the SDK's own list: no public way to say it
        tool.parameters["additionalProperties"] = False  # an unknown argument is refused (_Server.call_tool)
    return server


def _annotations(title: str) -> Any:
    from mcp.types import ToolAnnotations

    return ToolAnnotations(title=title, **_READ_ONLY)


def serve(repo: str = ".") -> int:
    """Serve the tools over stdio until the client closes the connection.

    Raises NotARepository (and the other open_workspace errors) before serving."""
    ws = open_workspace(repo)
    tools = Tools(ws)
    try:
        server = build_server(tools)
        threading.Thread(target=tools.warm_up, name="gitrag-warm-up", daemon=True).start()
        server.run("stdio")
    finally:
        with tools.lock:
            ws.close()
    return EXIT_OK
