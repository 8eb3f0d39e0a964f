"""Retrieval: sparse terms, the ranking wired to the store, scoping, snippets, freshness, expansion."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrag.index.sparse import query_vector, term_id, terms, with_path
from gitrag.index.store import Hit, SearchFilter
from gitrag.index.workspace import open_workspace
from gitrag.query import ranking
from gitrag.query.ranking import Candidate, expand, query_identifiers
from gitrag.query.retrieval import PREFETCH, SCORE_DEPTH, _Lookup, ask, candidates, search
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


def _fan_out(repo: Repo, callees: int) -> None:
    """``pkg/main.py``'s ``orchestrate`` calls ``callees`` helpers, one file each."""
    for i in range(callees):
        body = "".join(f"    y{j} = x * {j} + {i}\n" for j in range(8))
        repo.write(f"pkg/helper{i}.py", f"def helper_{i}(x):\n    \"\"\"Step {i} of the pipeline.\"\"\"\n{body}    return y0\n")
    imports = "".join(f"from pkg.helper{i} import helper_{i}\n" for i in range(callees))
    calls = "".join(f"    x = helper_{i}(x)\n" for i in range(callees))
    repo.write("pkg/main.py", f"{imports}\n\ndef orchestrate(x):\n{calls}    return x\n")
    repo.commit("a fan-out")
    index(repo.path)


def test_expand_adds_at_most_k_definitions(repo: Repo) -> None:
    """A new user's ``ask -k 1 --expand 1`` listed all 40 callees of the top result: the
    expansion now keeps the best ``k`` of them (search and ask, any mode, any offset)."""
    from gitrag.query.retrieval import _expansions

    _fan_out(repo, 12)
    with open_workspace(repo.path) as ws:
        for mode in ("sparse", "hybrid"):
            for k in (1, 3):
                plain = search(ws, "orchestrate the pipeline", k=k, mode=mode)
                got = search(ws, "orchestrate the pipeline", k=k, mode=mode, expand=1)
                assert got[: len(plain)] == plain and plain[0].symbol == "orchestrate", mode
                extra = got[len(plain):]
                uncapped = _expansions(ws, "main", plain, 1, None)
                assert len(uncapped) > k and len(extra) == k, (mode, k)  # more were there: k of them are kept
                assert [r.point_id for r in extra] == [r.point_id for r in uncapped[:k]]  # the best, in order
                assert all(r.expanded_from.startswith("pkg/main.py:") for r in extra)
                asked = ask(ws, "orchestrate the pipeline", k=k, mode=mode, expand=1).results
                assert [r.point_id for r in asked] == [r.point_id for r in got], (mode, k)
        page = ask(ws, "orchestrate the pipeline", k=2, mode="hybrid", offset=1, expand=1).results
        assert len(page) <= 4 and len([r for r in page if r.expanded_from]) <= 2


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


# -- deep scores read without payloads -----------------------------------------------------

WORDS = ("retry", "backoff", "session", "cart", "quantity", "token", "cache", "queue", "worker", "parse",
         "render", "config", "socket", "buffer", "schema")


@pytest.fixture(params=["embedded", "server"])
def many(request: pytest.FixtureRequest, repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """Well over SCORE_DEPTH chunks (each a function using three of WORDS), in the embedded
    Qdrant Edge store or qdrant-client's local mode, so each list's top PREFETCH is a part
    of what SCORE_DEPTH reads and many candidates sit below PREFETCH in the other list."""
    if request.param == "server":
        monkeypatch.setenv("GITRAG_QDRANT_URL", f"path:{tmp_path / 'qdrant-local'}")
    for f in range(40):
        body = ""
        for j in range(10):
            a, b, c = (WORDS[(f * 7 + j * n) % len(WORDS)] for n in (1, 2, 5))
            body += (f"def {a}_{b}_{f}_{j}({c}):\n    \"\"\"Handle the {a} of a {b} with its {c}.\"\"\"\n"
                     f"    return {c}.{a}({b}_{j})\n\n\n")
        repo.write(f"pkg/m{f}.py", body)
    repo.commit("many chunks")
    index(repo.path)
    return repo


def test_deep_scores_read_without_payloads_rank_exactly_as_full_lists(many: Repo) -> None:
    """The payload-free deep lists + payloads by id give the candidates, ranking and scores
    the lists read 300 deep with payloads gave (the path before payloads were skipped)."""
    questions = ("how is the retry backoff of a session handled", "cart quantity token", "where is parse_render_3_1",
                 "worker queue socket buffer schema config cache")
    with open_workspace(many.path) as ws:
        row = ws.state.branch(ws.repo.branch())
        # qdrant-client's local mode computes cosines with numpy, whose sums can differ in the
        # last bit from one call to the next (two identical searches with payloads, too)
        exact = ws.store.kind == "embedded"
        deep = 0
        for question in questions:
            query = ranking.analyse(question)
            dense = ws.embedder.embed_query(query.dense_text)
            terms = query_vector(question, query.term_weights)
            lists = [ws.store.search(row.collection, dense=d, sparse=s, limit=SCORE_DEPTH, branch=row.view,
                                     **extra)
                     for extra in ({}, {"with_payload": False}) for d, s in ((dense, None), (None, terms))]
            assert len(lists[0]) == len(lists[2]) == SCORE_DEPTH  # read that deep (the sparse list: as far as
            assert len(lists[1]) == len(lists[3]) > PREFETCH  # chunks share a term with the question)
            # the full lists with the payloads the search shows: the manifest rows (Store.payload_fields)
            rows = ws.state.payloads(h.id for h in lists[0] + lists[1])
            whole = [[Hit(h.id, h.score, rows[h.id]) for h in hits] for hits in lists[:2]]
            old = candidates(whole[0], whole[1], PREFETCH)
            new = candidates(lists[2], lists[3], PREFETCH, payloads=ws.state.payloads)
            assert len(old) > PREFETCH and all(c.payload for c in new)
            assert same(new, old, exact)
            in_both = {h.id for h in lists[0][:PREFETCH]} & {h.id for h in lists[1][:PREFETCH]}
            deep += sum(c.dense is not None and c.sparse is not None and c.key not in in_both for c in old)
            want = ranking.rank(query, old, 20, _Lookup(ws, row.name, None))
            got = search(ws, question, k=20, merge=False)
            assert [(r.point_id, r.path, r.start_line) for r in got] == [(c.key, c.path, c.start_line) for c in want]
            assert [r.score for r in got] == ([round(c.score, 6) for c in want] if exact else
                                              pytest.approx([c.score for c in want], abs=2e-6))
        assert deep > 0  # some candidates kept a score from below the other list's top PREFETCH


def same(new: list[Candidate], old: list[Candidate], exact: bool) -> bool:
    """Equal candidates; scores equal to the bit, or (``exact=False``) to 1e-12."""
    if exact:
        return new == old
    assert [(c.key, c.payload, c.dense is None, c.sparse is None) for c in new] == \
        [(c.key, c.payload, c.dense is None, c.sparse is None) for c in old]
    pairs = [(n.dense, o.dense) for n, o in zip(new, old) if o.dense is not None]
    pairs += [(n.sparse, o.sparse) for n, o in zip(new, old) if o.sparse is not None]
    return [a for a, _ in pairs] == pytest.approx([b for _, b in pairs], rel=1e-12, abs=1e-12)


def test_expand_links_no_test_code_and_no_method_by_its_name_alone(repo: Repo) -> None:
    """A new user's ``ask --expand`` offered a test's same-named method as called by the top
    result: the graph resolves calls by name. Implementation code is never expanded into test
    files, and a call through an object of unknown type (``job.execute()``) reaches a method
    only when the receiver names its class (``self.runner.execute()`` -> ``Runner``); a
    function called by name (``compute_total``) still is."""
    repo.write("app/workers.py", "class Runner:\n    def execute(self):\n        return 'ran the queued jobs'\n")
    repo.write("app/books.py", "class Ledger:\n    def close_books(self):\n        return 'closed'\n")
    repo.write("app/totals.py", "def compute_total(values):\n    return sum(values)\n")
    repo.write("app/engine.py", (
        "class Scheduler:\n    def __init__(self, runner):\n        self.runner = runner\n\n"
        "    def schedule_nightly_batch(self, job, values):\n        \"\"\"Schedule the nightly batch.\"\"\"\n"
        "        job.close_books()\n        self.runner.execute()\n        return compute_total(values)\n"))
    repo.write("tests/test_engine.py", (
        "def compute_total(values):\n    return 0\n\n\nclass FakeRunner:\n    def execute(self):\n"
        "        return 'fake'\n"))
    repo.commit("engine and its tests")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        got = search(ws, "schedule nightly batch", k=2, mode="sparse", expand=1)  # k=2: room for two expansions
    assert got[0].symbol.startswith("Scheduler"), got[0]
    linked = {r.path for r in got if r.expanded_from}
    assert "app/totals.py" in linked and "app/workers.py" in linked, linked  # compute_total, Runner.execute
    assert "tests/test_engine.py" not in linked, linked  # the test's compute_total and FakeRunner.execute
    assert "app/books.py" not in linked, linked  # job.close_books(): job names no class


def test_expand_keeps_a_go_method_calling_through_its_own_receiver(repo: Repo) -> None:
    """``func (s *Server) Start() { s.flushPending() }``: the receiver ``s`` names no class, but the
    caller is a method of Server, so Server.flushPending is its callee and is still expanded."""
    repo.write("server/server.go", (
        "package server\n\ntype Server struct {\n\tqueue []string\n}\n\n"
        "// StartListening starts listening for connections.\n"
        "func (s *Server) StartListening() error {\n\ts.flushPending()\n\treturn nil\n}\n"))
    repo.write("server/flush.go", (
        "package server\n\nfunc (s *Server) flushPending() {\n\ts.queue = s.queue[:0]\n}\n"))
    repo.commit("go server")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        got = search(ws, "StartListening starts listening for connections", k=1, mode="sparse", expand=1)
    assert got[0].path == "server/server.go", got[0]
    assert "server/flush.go" in {r.path for r in got[1:]}, [(r.path, r.symbol) for r in got]
