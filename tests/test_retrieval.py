"""Retrieval: sparse terms, the ranking wired to the store, scoping, snippets, freshness, expansion."""

from __future__ import annotations

import pytest

from gitrag.ranking import Candidate, expand, query_identifiers
from gitrag.retrieval import ask, search
from gitrag.sparse import query_vector, term_id, terms, with_path
from gitrag.store import SearchFilter
from gitrag.workspace import open_workspace
from tests.gitutil import Repo, index


def test_terms_keep_identifiers_whole_and_split() -> None:
    got = terms("def _unpack_args(getHTTPResponse2, os.path.join): CHUNK_OVERLAP = 10")
    for t in ("unpack_args", "unpack", "args", "gethttpresponse2", "http", "response",
              "os.path.join", "path", "join", "chunk_overlap", "chunk", "overlap"):
        assert t in got
    assert "def" in got and "the" not in terms("the def")


def test_path_terms_are_added_to_a_point() -> None:
    base = query_vector("alpha")
    combined = with_path(base, "src/click/termui.py")
    assert set(base.indices) < set(combined.indices)
    assert set(query_vector("termui click").indices) <= set(combined.indices)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("where is _unpack_args defined?", ["_unpack_args"]),
        ("What does Context.invoke do?", ["Context.invoke"]),
        ("how does `wrap_text` reflow paragraphs", ["wrap_text"]),
        ("getHTTPResponse() calls os.path.join", ["getHTTPResponse", "os.path.join"]),
        ("How are retries configured for failed requests?", []),
    ],
)
def test_query_identifiers(question: str, expected: list[str]) -> None:
    assert query_identifiers(question) == expected


def test_query_vector_takes_given_weights() -> None:
    vec = query_vector("ignored", {"session": 2.0, "adapter": 1.0})
    assert dict(zip(vec.indices, vec.values)) == {term_id("session"): 2.0, term_id("adapter"): 1.0}


def test_expansion_decays_by_hop() -> None:
    top = Candidate("t", "t.py", 1, 2, "t", score=1.0)
    callee = Candidate("c", "c.py", 1, 2, "c", score=0.0)
    out = expand([top], lambda cand: [(callee, 1)] if cand.key == "t" else [])
    assert [(x.key, x.score) for x in out] == [("t", 1.0), ("c", 0.5)]


@pytest.fixture
def indexed(repo: Repo) -> Repo:
    repo.write("net/retry.py", "def backoff_delay(attempt):\n    \"\"\"Seconds to wait before retrying a failed request.\"\"\"\n"
               "    return min(2 ** attempt, 60)\n")
    repo.write("net/client.py", "from net.retry import backoff_delay\n\n\ndef _unpack_args(args, kwargs):\n"
               "    return list(args), dict(kwargs)\n\n\nclass Client:\n    def send(self, request):\n"
               "        return backoff_delay(request.attempt)\n")
    repo.write("ui/colors.ts", "export const paint = (text: string): string => `\\u001b[31m${text}`;\n")
    repo.write("docs/guide.md", "# Guide\n\nRetries use an exponential backoff.\n")
    repo.commit("code")
    index(repo.path)
    return repo


def test_identifier_question_puts_the_definition_first(indexed: Repo) -> None:
    ws = open_workspace(indexed.path)
    try:
        for mode in ("hybrid", "sparse"):
            top = search(ws, "where is _unpack_args defined", k=3, mode=mode)[0]
            assert (top.path, top.start_line <= 4 <= top.end_line) == ("net/client.py", True), mode
            assert "def _unpack_args" in top.snippet
    finally:
        ws.close()


def test_scope_by_path_and_language(indexed: Repo) -> None:
    ws = open_workspace(indexed.path)
    try:
        for mode in ("hybrid", "dense", "sparse"):
            got = search(ws, "retry backoff delay", k=10, mode=mode, scope=SearchFilter(path_prefix="net/"))
            assert got and all(r.path.startswith("net/") for r in got)
            ts = search(ws, "paint text", k=10, mode=mode, scope=SearchFilter(language="typescript"))
            assert [r.path for r in ts] == ["ui/colors.ts"]
    finally:
        ws.close()


def test_ask_reports_freshness(indexed: Repo) -> None:
    indexed.write("net/new.py", "def fresh():\n    return 1\n")
    indexed.commit("unindexed commit")
    indexed.write("scratch.txt", "work in progress\n")
    ws = open_workspace(indexed.path)
    try:
        r = ask(ws, "backoff", k=2).to_json()
    finally:
        ws.close()
    assert r["up_to_date"] is False and r["commit"] != r["head"] == indexed.head()
    assert r["worktree_changes"] == 1 and r["answer"] is None
    assert {"path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet"} <= set(r["results"][0])


def test_expand_appends_the_definitions_top_results_depend_on(indexed: Repo) -> None:
    ws = open_workspace(indexed.path)
    try:
        plain = search(ws, "Client send request", k=1, mode="hybrid")
        expanded = search(ws, "Client send request", k=1, mode="hybrid", expand=1)
    finally:
        ws.close()
    assert plain[0].symbol.startswith("Client") and len(plain) == 1
    assert expanded[0] == plain[0]
    extra = expanded[1:]
    assert [(r.path, r.symbol) for r in extra] == [("net/retry.py", "backoff_delay")]
    assert extra[0].expanded_from.startswith("net/client.py:") and extra[0].score < plain[0].score
    assert "def backoff_delay" in extra[0].snippet
