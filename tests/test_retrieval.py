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
    with open_workspace(indexed.path) as ws:
        for mode in ("hybrid", "sparse"):
            top = search(ws, "where is _unpack_args defined", k=3, mode=mode)[0]
            assert (top.path, top.start_line <= 4 <= top.end_line) == ("net/client.py", True), mode
            assert "def _unpack_args" in top.snippet


def test_scope_by_path_and_language(indexed: Repo) -> None:
    with open_workspace(indexed.path) as ws:
        for mode in ("hybrid", "dense", "sparse"):
            got = search(ws, "retry backoff delay", k=10, mode=mode, scope=SearchFilter(path_prefix="net/"))
            assert got and all(r.path.startswith("net/") for r in got)
            ts = search(ws, "paint text", k=10, mode=mode, scope=SearchFilter(language="typescript"))
            assert [r.path for r in ts] == ["ui/colors.ts"]


def test_ask_reports_freshness(indexed: Repo) -> None:
    indexed.write("net/new.py", "def fresh():\n    return 1\n")
    indexed.commit("unindexed commit")
    indexed.write("scratch.txt", "work in progress\n")
    with open_workspace(indexed.path) as ws:
        r = ask(ws, "backoff", k=2).to_json()
    assert r["up_to_date"] is False and r["commit"] != r["head"] == indexed.head()
    assert r["worktree_changes"] == 1 and r["answer"] is None
    assert {"path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet"} <= set(r["results"][0])


def test_expand_appends_the_definitions_top_results_depend_on(indexed: Repo) -> None:
    with open_workspace(indexed.path) as ws:
        plain = search(ws, "Client send request", k=1, mode="hybrid")
        expanded = search(ws, "Client send request", k=1, mode="hybrid", expand=1)
    assert plain[0].symbol.startswith("Client") and len(plain) == 1
    assert expanded[0] == plain[0]
    extra = expanded[1:]
    assert [(r.path, r.symbol) for r in extra] == [("net/retry.py", "backoff_delay")]
    assert extra[0].expanded_from.startswith("net/client.py:") and extra[0].score < plain[0].score
    assert "def backoff_delay" in extra[0].snippet


# -- --exclude, merged pieces, ranked files ------------------------------------------------


@pytest.fixture
def docs_heavy(repo: Repo) -> Repo:
    """Twelve Markdown pages that match "retry backoff" better than any of six Python files."""
    for i in range(12):
        repo.write(f"docs/page{i}.md", f"# Retry backoff {i}\n\nRetry backoff retry backoff: the retry backoff doubles.\n")
    for i in range(6):
        repo.write(f"src/mod{i}.py", f"def step_{i}(attempt):\n    \"\"\"One retry.\"\"\"\n    return attempt + {i}\n")
    repo.write("src/notes.txt", "retry backoff notes\n")
    repo.commit("docs and code")
    index(repo.path)
    return repo


def test_exclude_leaves_paths_out_and_still_fills_k(docs_heavy: Repo) -> None:
    with open_workspace(docs_heavy.path) as ws:
        for mode in ("hybrid", "dense", "sparse"):
            plain = search(ws, "retry backoff", k=7, mode=mode)
            if mode != "dense":  # the hash embedder's dense side knows no words
                assert any(r.path.endswith(".md") for r in plain), mode
            got = search(ws, "retry backoff", k=7, mode=mode, scope=SearchFilter(exclude=("*.md",)))
            assert len(got) == 7, mode  # the 6 Python files and the text file: all 7 others
            assert {r.path for r in got} == {f"src/mod{i}.py" for i in range(6)} | {"src/notes.txt"}
            two = search(ws, "retry backoff", k=10, mode=mode,
                         scope=SearchFilter(path_prefix="src/", exclude=("docs/**", "*.txt", "src/mod0.py")))
            assert {r.path for r in two} == {f"src/mod{i}.py" for i in range(1, 6)}, mode


def test_exclude_applies_to_the_definitions_fused_into_the_ranking(indexed: Repo) -> None:
    with open_workspace(indexed.path) as ws:
        top = search(ws, "where is _unpack_args defined", k=5)
        assert top[0].path == "net/client.py"
        got = search(ws, "where is _unpack_args defined", k=5, scope=SearchFilter(exclude=("net/client.py",)))
        assert got and all(r.path != "net/client.py" for r in got)


LONG_BODY = "\n".join(f"    total += retry_weight_{i} * backoff_factor(attempt, {i})" for i in range(60))


def test_pieces_of_one_definition_come_back_as_one_result(repo: Repo) -> None:
    source = f"def long_backoff(attempt):\n    total = 0\n{LONG_BODY}\n    return total\n"
    repo.write("net/long.py", source)
    repo.write("net/other.py", "def unrelated():\n    return 0\n")
    repo.commit("a long function")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        pieces = search(ws, "retry_weight backoff_factor", k=10, mode="sparse", merge=False)
        merged = search(ws, "retry_weight backoff_factor", k=10, mode="sparse")
    assert len([r for r in pieces if r.path == "net/long.py"]) >= 2  # the function was cut into pieces
    (one,) = [r for r in merged if r.path == "net/long.py"]
    assert (one.start_line, one.end_line) == (1, source.count("\n"))
    assert one.score == max(r.score for r in pieces)
    assert one.snippet == source


def test_ask_files_ranks_files_with_their_best_chunks(indexed: Repo) -> None:
    with open_workspace(indexed.path) as ws:
        r = ask(ws, "retry backoff delay request", k=2, mode="sparse", files=True)
        plain = ask(ws, "retry backoff delay request", k=2, mode="sparse")
    assert r.files is not None and len(r.files) == 2
    assert [x.path for x in r.results] == [x.path for x in plain.results]  # results unchanged
    data = r.to_json()
    assert "files" not in plain.to_json()
    first = data["files"][0]
    assert set(first) == {"path", "language", "score", "matches", "chunks"}
    assert first["score"] == first["chunks"][0]["score"] >= data["files"][1]["score"]
    assert set(first["chunks"][0]) == {"start_line", "end_line", "symbol", "kind", "score"}
    assert {f["path"] for f in data["files"]} <= {"net/retry.py", "net/client.py", "docs/guide.md"}
