"""``gitrag mcp`` driven by the official MCP SDK client over stdio, as an agent would.

The server runs as a subprocess (``python -m gitrag mcp --repo PATH``) on a real git
repository indexed in-process with the fast ``hash`` embedder and the real chunker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gitrag.index.chunking import CHUNKER_VERSION
from gitrag.index.workspace import open_workspace
from gitrag.query.results import MAX_K
from gitrag.surfaces.mcp import ToolInputError, clean_path
from tests.gitutil import Repo, index

# Definitions and references come from the tree-sitter chunker (CHUNKER_VERSION "1");
# the placeholder chunker ("0") records none, so those assertions cannot hold there.
needs_chunker = pytest.mark.skipif(CHUNKER_VERSION == "0", reason="the tree-sitter chunker has not landed")

GREETER = '''\
"""Greetings for people."""
import os

from app.util import shout


class Greeter:
    """Greets people by name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def greet(self) -> str:
        """Return the greeting."""
        return shout(self._format())

    def _format(self) -> str:
        return os.path.join("hello", self.name)


class LoudGreeter(Greeter):
    """Greets loudly."""

    def greet(self) -> str:
        return super().greet() + "!"
'''

UTIL = '''\
"""Helpers."""


def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


def main() -> None:
    from app.greeter import Greeter

    print(Greeter("world").greet())
'''

TOOLS = {"search_code", "find_related", "get_symbol", "get_symbol_dependencies", "get_file_outline", "index_status"}
Call = Callable[..., Awaitable[Any]]


@pytest.fixture
def indexed(repo: Repo) -> Repo:
    repo.write("app/__init__.py", "")
    repo.write("app/greeter.py", GREETER)
    repo.write("app/util.py", UTIL)
    repo.commit("greeter and util")
    index(repo.path)
    return repo


@asynccontextmanager
async def _session(path: Path, errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "gitrag", "mcp", "--repo", str(path)],
                                   env=dict(os.environ))
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def _drive(path: Path, tmp_path: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with _session(path, tmp_path / "server.err") as session:
                await body(session)

    anyio.run(main)


async def _ok(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    res = await session.call_tool(tool, args)
    assert not res.is_error, res.content
    data = res.structured_content
    assert data == json.loads(res.content[0].text)  # the same JSON for clients that read text only
    return data


async def _error(session: ClientSession, tool: str, **args: Any) -> str:
    """The error text of a failing call; gitrag's own errors are one line."""
    res = await session.call_tool(tool, args)
    assert res.is_error
    text = res.content[0].text
    assert text.startswith(f"Error executing tool {tool}: ")  # the SDK's prefix
    return text


async def _gitrag_error(session: ClientSession, tool: str, **args: Any) -> str:
    text = await _error(session, tool, **args)
    assert "\n" not in text and "Traceback" not in text
    return text


def _fresh(data: dict[str, Any], repo: Repo) -> None:
    assert data["branch"] == "main" and data["commit"] == repo.head() == data["head"]
    assert data["up_to_date"] is True and data["worktree_changes"] == 0


def test_tools_are_listed_with_usable_schemas(indexed: Repo, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert set(tools) == TOOLS
        for t in tools.values():
            assert len(t.description or "") > 60 and t.input_schema["type"] == "object"
            assert t.annotations is not None and t.annotations.read_only_hint is True
        search = tools["search_code"].input_schema
        assert search["required"] == ["query"]
        assert set(search["properties"]) == {"query", "k", "mode", "path_prefix", "language", "exclude", "files",
                                            "offset", "committed", "rev"}
        assert search["properties"]["exclude"]["type"] == "array" and search["properties"]["files"]["type"] == "boolean"
        assert search["properties"]["mode"]["enum"] == ["hybrid", "dense", "sparse"]
        assert search["properties"]["k"]["maximum"] == MAX_K == 200 and search["properties"]["k"]["default"] == 10
        # one limit: every tool's k is the CLI's -k (1-200), not a smaller one of its own
        assert {t.input_schema["properties"]["k"]["maximum"] for t in tools.values()
                if "k" in t.input_schema["properties"]} == {MAX_K}
        assert all(p.get("description") for p in search["properties"].values())
        assert tools["get_symbol"].input_schema["required"] == ["name"]
        assert tools["get_symbol_dependencies"].input_schema["required"] == ["symbol"]
        assert tools["get_file_outline"].input_schema["required"] == ["path"]
        assert tools["index_status"].input_schema.get("required", []) == []

    _drive(indexed.path, tmp_path, body)


def test_search_and_status(indexed: Repo, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        status = await _ok(s, "index_status")
        _fresh(status, indexed)
        assert status["indexed"] is True and status["files_indexed"] == 3 and status["chunks"] > 0
        assert status["embedder"] == "hash" and "hint" not in status

        data = await _ok(s, "search_code", query="upper-case text", k=3)
        _fresh(data, indexed)
        top = data["results"][0]
        assert top["path"] == "app/util.py" and top["start_line"] <= 4 <= top["end_line"]
        lines = UTIL.splitlines()[top["start_line"] - 1 : top["end_line"]]
        assert top["snippet"].rstrip("\n") == "\n".join(lines).rstrip("\n")  # the lines it claims
        assert set(top) == {"path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet", "source"}
        assert top["source"] == "index"
        scoped = await _ok(s, "search_code", query="greet", path_prefix="app/greeter", mode="sparse")
        assert scoped["results"] and {r["path"] for r in scoped["results"]} == {"app/greeter.py"}
        kept = await _ok(s, "search_code", query="greet shout text", mode="sparse", k=5, exclude=["app/greeter.py"])
        assert kept["results"] and "app/greeter.py" not in {r["path"] for r in kept["results"]}
        assert "files" not in kept
        ranked = await _ok(s, "search_code", query="greet shout text", mode="sparse", k=2, files=True)
        assert 1 <= len(ranked["files"]) <= 2 and ranked["files"][0]["score"] >= ranked["results"][0]["score"]
        # a file's score: its best chunk's, plus damped shares of the next two (gitrag.query.file_results)
        assert ranked["files"][0]["score"] >= ranked["files"][0]["chunks"][0]["score"]
        assert set(ranked["files"][0]) == {"path", "language", "score", "matches", "chunks"}
        assert ranked["files"][0]["chunks"][0]["start_line"] >= 1
        bad = await _gitrag_error(s, "search_code", query="greet", exclude=[""])
        assert "invalid exclude glob" in bad

    _drive(indexed.path, tmp_path, body)


def test_index_status_says_the_daemon_is_indexing_it(indexed: Repo, tmp_path: Path) -> None:
    """While a running daemon brings the branch to HEAD, index_status says so, with its
    progress, instead of telling the agent to run `gitrag index`."""
    from gitrag.daemon import client
    from tests.daemonutil import stop_daemon, wait_for
    from tests.reliability import functions, start_daemon

    for k in range(3):
        indexed.write(f"app/more_{k}.py", functions(f"more{k}", 8))
    head = indexed.commit("more")
    slow = {"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 1.0]]}
    daemon = start_daemon(prelude=slow, env={"GITRAG_BATCH_SIZE": "2"})  # about 12 s of embedding
    repo = str(indexed.path)

    def embedding() -> bool:
        return client.request("progress", timeout=10, repo=repo)["stage"] == "embed"

    async def body(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, lambda: client.request("index", timeout=None, repo=repo))
            await anyio.to_thread.run_sync(lambda: wait_for(embedding, "the daemon to embed"))
            status = await _ok(s, "index_status")
        assert status["indexed"] is True and status["up_to_date"] is False and status["head"] == head
        assert re.fullmatch(r"the daemon is indexing it now \(embedding chunks: \d+ of \d+\)", status["catching_up"])
        assert status["hint"] == f"{status['catching_up']}; ask again in a moment" and "gitrag index" not in status["hint"]
        done = await _ok(s, "index_status")  # the index request has returned
        assert done["up_to_date"] is True and done["commit"] == head and "hint" not in done and "catching_up" not in done

    try:
        _drive(indexed.path, tmp_path, body)
    finally:
        assert stop_daemon(daemon) == 0


@needs_chunker
def test_symbols_point_at_the_right_lines(indexed: Repo, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        data = await _ok(s, "get_symbol", name="Greeter.greet")
        _fresh(data, indexed)
        (d,) = data["definitions"]
        assert (d["path"], d["start_line"], d["end_line"], d["kind"], d["parent"]) == ("app/greeter.py", 13, 15, "method", "Greeter")
        assert d["snippet"].splitlines()[0] == "    def greet(self) -> str:" and len(d["snippet"].splitlines()) == 3

        both = await _ok(s, "get_symbol", name="greet")
        assert [x["name"] for x in both["definitions"]] == ["Greeter.greet", "LoudGreeter.greet"] and both["total"] == 2

        outline = await _ok(s, "get_file_outline", path="./app//greeter.py")
        assert outline["path"] == "app/greeter.py"
        assert [(x["name"], x["start_line"], x["end_line"]) for x in outline["definitions"]] == [
            ("Greeter", 7, 18), ("Greeter.__init__", 10, 11), ("Greeter.greet", 13, 15),
            ("Greeter._format", 17, 18), ("LoudGreeter", 21, 25), ("LoudGreeter.greet", 24, 25)]

        deps = await _ok(s, "get_symbol_dependencies", symbol="Greeter.greet")
        callees = {(c["name"], c["line"]): c["definition"] for c in deps["callees"]}
        assert callees[("shout", 15)]["path"] == "app/util.py" and callees[("shout", 15)]["start_line"] == 4
        assert callees[("self._format", 15)]["name"] == "Greeter._format"  # self. resolves within the class
        assert [(c["name"], c["path"], c["line"]) for c in deps["callers"]] == [
            ("LoudGreeter.greet", "app/greeter.py", 25), ("main", "app/util.py", 12)]
        assert [(i["name"], i["definition"]["name"]) for i in deps["imports"]] == [("app.util.shout", "shout")]

        two = await _ok(s, "get_symbol_dependencies", symbol="Greeter._format", hops=2)
        assert [(c["name"], c["hop"]) for c in two["callers"]] == [("Greeter.greet", 1), ("LoudGreeter.greet", 2), ("main", 2)]
        external = await _ok(s, "get_symbol_dependencies", symbol="_format")
        assert [(c["name"], c["definition"]) for c in external["callees"]] == [("os.path.join", None)]

    _drive(indexed.path, tmp_path, body)


@needs_chunker
def test_python_bases_and_subclasses(indexed: Repo, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        deps = await _ok(s, "get_symbol_dependencies", symbol="Greeter")
        assert [(c["name"], c["line"]) for c in deps["subclasses"]] == [("LoudGreeter", 21)]
        loud = await _ok(s, "get_symbol_dependencies", symbol="LoudGreeter")
        assert [c["definition"]["name"] for c in loud["bases"]] == ["Greeter"]

    _drive(indexed.path, tmp_path, body)


def test_freshness_and_snippets_come_from_the_indexed_commit(indexed: Repo, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_ASK_WAIT", "0")  # answer from the index there is (no catch-up first)
    indexed.write("app/util.py", UTIL.replace("Upper-case text.", "EDITED IN THE WORK TREE"))
    indexed.write("app/new.py", "x = 1\n")
    indexed.git("add", "app/new.py")
    indexed.commit("not indexed yet", "app/new.py")

    async def body(s: ClientSession) -> None:
        status = await _ok(s, "index_status")
        assert status["up_to_date"] is False and status["head"] == indexed.head() != status["commit"]
        assert status["worktree_changes"] == 1 and "gitrag index" in status["hint"]
        data = await _ok(s, "search_code", query="shout upper-case text", k=3, committed=True)
        assert data["up_to_date"] is False and data["worktree_changes"] == 1
        assert all("EDITED" not in r["snippet"] for r in data["results"])
        assert any("Upper-case text." in r["snippet"] for r in data["results"])
        assert all(r["source"] == "index" for r in data["results"])
        if CHUNKER_VERSION != "0":
            (d,) = (await _ok(s, "get_symbol", name="shout"))["definitions"]
            assert "Upper-case text." in d["snippet"] and "EDITED" not in d["snippet"]

    _drive(indexed.path, tmp_path, body)


def test_errors_are_tool_errors_and_the_server_keeps_serving(indexed: Repo, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        assert "is absolute" in await _gitrag_error(s, "get_file_outline", path="/etc/passwd")
        assert "leaves the repository" in await _gitrag_error(s, "get_file_outline", path="app/../../secret.py")
        assert "leaves the repository" in await _gitrag_error(s, "search_code", query="x", path_prefix="../")
        assert "not in the index" in await _gitrag_error(s, "get_file_outline", path="app/missing.py")
        assert "no definition named 'NoSuchThing'" in await _gitrag_error(s, "get_symbol", name="NoSuchThing")
        assert "no definition named" in await _gitrag_error(s, "get_symbol_dependencies", symbol="NoSuchThing")
        # arguments that fail the schema: gitrag's one line, naming the argument
        assert "argument 'mode': Input should be 'hybrid', 'dense' or 'sparse'" in await _gitrag_error(
            s, "search_code", query="x", mode="fuzzy")
        assert "argument 'k': Input should be greater than or equal to 1" in await _gitrag_error(
            s, "search_code", query="x", k=0)
        assert await _gitrag_error(s, "search_code") == "Error executing tool search_code: argument 'query' is required"
        missing = await _gitrag_error(s, "get_symbol_dependencies", hops="many")
        assert "argument 'symbol' is required" in missing and "argument 'hops':" in missing
        assert (await _ok(s, "index_status"))["indexed"] is True  # still serving

    _drive(indexed.path, tmp_path, body)
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def test_an_unknown_language_path_prefix_or_argument_is_a_tool_error(indexed: Repo, tmp_path: Path) -> None:
    """search_code (and find_related) took an unknown language, a path_prefix no indexed file
    starts with, and arguments it does not have, and answered an empty (or unfiltered) list:
    each is now a tool error (is_error) of one line, as the MCP spec's tool errors are; the
    schemas say additionalProperties: false. A NUL in the query is named as the query's."""
    from gitrag.index.chunking.languages import LANGUAGES

    async def body(s: ClientSession) -> None:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
        known = ", ".join(LANGUAGES)
        for tool, args in (("search_code", {"query": "greet"}), ("find_related", {"path": "app/util.py", "line": 4})):
            said = await _gitrag_error(s, tool, **args, language="klingon")
            assert said == f"Error executing tool {tool}: unknown language 'klingon'; known: {known}"
            said = await _gitrag_error(s, tool, **args, path_prefix="ap/")
            assert said == f"Error executing tool {tool}: path_prefix 'ap/' matches no indexed file; nearest: app/"
            said = await _gitrag_error(s, tool, **args, path_prefix="zzzz/")
            assert said.endswith("path_prefix 'zzzz/' matches no indexed file (`git ls-files` lists the "
                                 "repository's files)")
        said = await _gitrag_error(s, "search_code", query="greet", foo=1, langauge="python")
        assert said == ("Error executing tool search_code: unknown argument 'foo'; unknown argument 'langauge' "
                        "(known: query, k, mode, path_prefix, language, exclude, files, offset, committed, rev)")
        assert await _gitrag_error(s, "index_status", verbose=True) == (
            "Error executing tool index_status: unknown argument 'verbose' (known: none)")
        said = await _gitrag_error(s, "search_code", query="gr\0eet")
        assert said == ("Error executing tool search_code: the query holds a NUL character (character 3); "
                        "a query is text: remove it")
        # what is known still answers: a language in any case, a prefix that matches, nothing left by both
        assert (await _ok(s, "search_code", query="greet", language="Python", path_prefix="app/"))["results"]
        assert (await _ok(s, "search_code", query="greet", language="go", path_prefix="app/"))["results"] == []

    _drive(indexed.path, tmp_path, body)
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def test_unindexed_repository(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("one")

    async def body(s: ClientSession) -> None:
        status = await _ok(s, "index_status")
        assert status["indexed"] is False and status["commit"] is None and "gitrag index" in status["hint"]
        assert "run `gitrag index` first" in await _gitrag_error(s, "search_code", query="x")
        assert "run `gitrag index` first" in await _gitrag_error(s, "get_symbol", name="x")

    _drive(repo.path, tmp_path, body)


def test_not_a_repository_fails_before_serving(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "gitrag", "mcp", "--repo", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "not inside a git repository" in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("raw, want", [("a/b.py", "a/b.py"), ("./a//b.py", "a/b.py"), ("a\\b.py", "a/b.py")])
def test_clean_path_accepts_relative(raw: str, want: str) -> None:
    assert clean_path(raw) == want


@pytest.mark.parametrize("raw", ["/etc/passwd", "~/x", "C:/x", "a/../../b", "..", "", "a\0b"])
def test_clean_path_refuses(raw: str) -> None:
    with pytest.raises(ToolInputError):
        clean_path(raw)


def test_clean_prefix_keeps_trailing_slash() -> None:
    assert clean_path("src/", prefix=True) == "src/" and clean_path("", prefix=True) == ""


def test_a_bug_in_a_tool_is_a_tool_error(indexed: Repo) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from gitrag.surfaces.mcp import Tools

    with open_workspace(indexed.path) as ws:
        tools = Tools(ws)

        def broken() -> None:
            raise KeyError("oops")

        with pytest.raises(ToolError, match="internal error in gitrag: KeyError"):
            tools.run(broken)
        assert tools.run(tools.index_status)["indexed"] is True  # the lock was released


def test_search_goes_through_a_running_daemon(indexed: Repo, tmp_path: Path, daemon: Any) -> None:
    """The daemon holds the embedded store; search_code must still answer (through it)."""
    from gitrag.daemon import client

    client.request("ask", timeout=120, repo=str(indexed.path), question="greet")  # the daemon now holds the shard

    async def body(s: ClientSession) -> None:
        data = await _ok(s, "search_code", query="upper-case text", k=3)
        _fresh(data, indexed)
        assert data["results"][0]["path"] == "app/util.py"

    _drive(indexed.path, tmp_path, body)


def test_a_line_that_is_not_a_request_gets_the_json_rpc_error_and_serving_goes_on(indexed: Repo) -> None:
    """Over the real stdin and stdout of `gitrag mcp`: a line that is not JSON is answered
    with -32700 (Parse error), JSON that is not a request object with -32600 (Invalid
    Request), both with id null as JSON-RPC 2.0 says; a blank line gets no reply; the
    requests around them are answered."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    lines = [json.dumps(init), "this is not json {", "", "42", '{"jsonrpc": "2.0", "id": 7, "method": 3}',
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})]
    proc = subprocess.run([sys.executable, "-m", "gitrag", "mcp", "--repo", str(indexed.path)],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(x) for x in proc.stdout.splitlines()]
    errors = [r for r in replies if "error" in r]
    assert [(r["id"], r["error"]["code"]) for r in errors] == [(None, -32700), (None, -32600), (None, -32600)]
    assert all(r["jsonrpc"] == "2.0" and r["error"]["message"] for r in errors)
    answered = {r["id"]: r["result"] for r in replies if "result" in r}
    assert set(answered) == {1, 2} and "search_code" in {t["name"] for t in answered[2]["tools"]}
