"""The work-tree overlay (gitrag.query.worktree): uncommitted edits, new untracked files,
deletions and renames are searched with the branch's index, marked as work tree, on real
git repositories indexed in-process with the hash embedder and the real chunker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitrag.index.store import SearchFilter
from gitrag.index.workspace import open_workspace
from gitrag.query import worktree
from gitrag.query.retrieval import ask
from tests.gitutil import Repo, index

RETRY = ("def backoff_delay(attempt):\n    \"\"\"Seconds to wait before retrying a failed request.\"\"\"\n"
         "    return min(2 ** attempt, 60)\n")
CLIENT = ("def open_connection(host, port):\n    \"\"\"Open a socket to the host.\"\"\"\n    return (host, port)\n\n\n"
          "class Client:\n    def send(self, request):\n        return open_connection(request.host, 80)\n")
PARSER = "def parse_header_line(line):\n    \"\"\"Split one HTTP header line into name and value.\"\"\"\n" \
         "    name, _, value = line.partition(':')\n    return name.strip(), value.strip()\n"


@pytest.fixture
def indexed(repo: Repo) -> Repo:
    repo.write("net/retry.py", RETRY)
    repo.write("net/client.py", CLIENT)
    repo.write("http/parser.py", PARSER)
    repo.write("docs/guide.md", "# Guide\n\nRetries use an exponential backoff.\n")
    repo.write(".gitignore", "build/\n")
    repo.commit("code")
    index(repo.path)
    return repo


def _ask(repo: Repo, question: str, **kw: object) -> dict:
    with open_workspace(repo.path) as ws:
        return ask(ws, question, k=kw.pop("k", 5), worktree_overlay=kw.pop("worktree", True), **kw).to_json()


def _cli(repo: Repo, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "gitrag", "ask", *args, "--repo", str(repo.path), "--json",
                           "--no-answer"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_edit_is_found_from_the_work_tree_and_hides_the_committed_chunk(indexed: Repo) -> None:
    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "jittered_backoff_delay")
                  .replace("min(2 ** attempt, 60)", "min(2 ** attempt, 60) * random_jitter()"))
    got = _ask(indexed, "jittered_backoff_delay random_jitter")
    top = got["results"][0]
    assert (top["path"], top["source"]) == ("net/retry.py", "worktree")
    assert "jittered_backoff_delay" in top["snippet"] and "random_jitter()" in top["snippet"]  # from disk
    assert all(not (r["path"] == "net/retry.py" and r["source"] == "index") for r in got["results"])
    assert got["worktree"]["searched"] is True and got["worktree"]["files"] == 1 and got["worktree"]["hidden"] == 1
    assert got["worktree_changes"] == 1
    committed = _ask(indexed, "jittered_backoff_delay random_jitter", worktree=False)
    assert all(r["source"] == "index" for r in committed["results"])
    assert all("jittered" not in r["snippet"] for r in committed["results"])
    assert any(r["path"] == "net/retry.py" for r in committed["results"])


def test_a_new_untracked_file_is_found_but_an_ignored_one_is_not(indexed: Repo) -> None:
    indexed.write("net/cache.py", "def evict_least_recently_used(cache):\n    \"\"\"Drop the oldest entry.\"\"\"\n"
                  "    cache.popitem(last=False)\n")
    indexed.write("build/generated.py", "def evict_least_recently_used_copy(cache):\n    return None\n")
    got = _ask(indexed, "evict_least_recently_used")
    assert got["results"][0]["path"] == "net/cache.py" and got["results"][0]["source"] == "worktree"
    assert all(not r["path"].startswith("build/") for r in got["results"])
    assert got["worktree"]["hidden"] == 0


@pytest.mark.parametrize("post_filter", [True, False], ids=["dropped-by-id", "filtered-by-the-store"])
def test_a_deleted_file_no_longer_answers(indexed: Repo, post_filter: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not post_filter:
        monkeypatch.setattr(worktree, "POST_FILTER_MAX", 0)
    (indexed.path / "http/parser.py").unlink()
    got = _ask(indexed, "parse_header_line HTTP header", k=10)
    assert all(r["path"] != "http/parser.py" for r in got["results"])
    assert got["worktree"]["hidden"] == 1 and got["worktree"]["files"] == 0
    before = _ask(indexed, "parse_header_line HTTP header", k=10, worktree=False)
    assert before["results"][0]["path"] == "http/parser.py"


def test_a_rename_answers_at_the_new_path_only(indexed: Repo) -> None:
    indexed.git("mv", "http/parser.py", "http/headers.py")
    got = _ask(indexed, "parse_header_line", k=10)
    paths = [(r["path"], r["source"]) for r in got["results"]]
    assert paths[0] == ("http/headers.py", "worktree")
    assert all(p != "http/parser.py" for p, _ in paths)


def test_the_second_ask_embeds_nothing(indexed: Repo) -> None:
    indexed.write("net/retry.py", RETRY + "\n\ndef reset_attempts(state):\n    state.attempts = 0\n")
    first = _ask(indexed, "reset_attempts")
    assert first["worktree"]["embedded"] > 0
    worktree._cache.clear()  # a new process: only the vector cache (SQLite) is left
    second = _ask(indexed, "reset_attempts")
    assert second["worktree"]["embedded"] == 0 and second["results"] == first["results"]


def test_policy_skips_binary_and_gitragignore_in_the_work_tree(indexed: Repo) -> None:
    indexed.write(".gitragignore", "scratch/\n")
    indexed.write("scratch/notes.py", "def unique_scratch_function():\n    return 1\n")
    indexed.write("net/blob.bin", b"\0\1\2 unique_scratch_function")
    got = _ask(indexed, "unique_scratch_function", k=10)
    assert all(not r["path"].startswith("scratch/") and r["path"] != "net/blob.bin" for r in got["results"])
    assert got["worktree"]["skipped"] == 2


def test_scope_filters_apply_to_work_tree_chunks(indexed: Repo) -> None:
    indexed.write("net/cache.py", "def evict_entry(cache):\n    cache.popitem()\n")
    with open_workspace(indexed.path) as ws:
        got = ask(ws, "evict_entry", k=5, scope=SearchFilter(path_prefix="http/"), worktree_overlay=True)
    assert all(r.path.startswith("http/") for r in got.results)


def test_modes_dense_and_sparse_merge_the_work_tree(indexed: Repo) -> None:
    indexed.write("net/cache.py", "def evict_least_recently_used(cache):\n    cache.popitem(last=False)\n")
    for mode in ("dense", "sparse"):
        got = _ask(indexed, "evict_least_recently_used", mode=mode)
        assert got["results"][0]["path"] == "net/cache.py", mode


def test_work_tree_sparse_scores_are_on_the_store_scale(indexed: Repo) -> None:
    """A work-tree copy of an indexed file scores what its committed point scores."""
    indexed.write("net/retry_copy.py", RETRY)
    with open_workspace(indexed.path) as ws:
        got = ask(ws, "backoff_delay attempt retrying", k=10, mode="sparse", worktree_overlay=True).results
    score = {(r.path, r.source): r.score for r in got}
    assert ("net/retry_copy.py", "worktree") in score and ("net/retry.py", "index") in score
    # same text; only the path terms differ (retry vs retry, copy): the IDF is the store's own
    committed, copy = score[("net/retry.py", "index")], score[("net/retry_copy.py", "worktree")]
    assert abs(committed - copy) / committed < 0.25
    with open_workspace(indexed.path) as ws:
        dense = ask(ws, "backoff delay", k=10, mode="dense", worktree_overlay=True).results
    d = {(r.path, r.source): r.score for r in dense}
    assert abs(d[("net/retry.py", "index")] - d[("net/retry_copy.py", "worktree")]) < 0.2


def test_cli_marks_work_tree_results_and_committed_gives_todays_answer(indexed: Repo) -> None:
    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "capped_backoff"))
    got = _cli(indexed, "capped_backoff")
    assert got["results"][0]["source"] == "worktree" and "capped_backoff" in got["results"][0]["snippet"]
    today = _cli(indexed, "capped_backoff", "--committed")
    assert today["worktree"]["searched"] is False and all(r["source"] == "index" for r in today["results"])
    human = subprocess.run([sys.executable, "-m", "gitrag", "ask", "capped_backoff", "--repo", str(indexed.path),
                            "--no-answer", "-k", "2"], capture_output=True, text=True, check=True).stdout
    assert "[work tree]" in human.splitlines()[0] and "searched from the work tree" in human


def test_over_the_overlay_budget_the_hint_names_only_what_works(
        indexed: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gitrag index` reads commits only, so it must not be offered for files over the budget."""
    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    monkeypatch.setattr(worktree, "MAX_FILES", 2)
    for i in range(5):
        indexed.write(f"scratch/note_{i}.py", f"def scratch_helper_{i}():\n    return {i}\n")
    result = CliRunner().invoke(cli, ["ask", "scratch_helper", "--repo", str(indexed.path), "--no-answer"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.stdout.splitlines() if "not searched" in ln)
    assert "3 of them not searched: over the overlay's budget of 2 files" in line
    assert "gitrag index" not in line and "commit them" in line and "--committed" in line


def test_offset_pages_through_the_same_ranking(indexed: Repo) -> None:
    full = _cli(indexed, "backoff header socket guide", "-k", "4", "--committed")
    page = _cli(indexed, "backoff header socket guide", "-k", "2", "--offset", "2", "--committed")
    key = [(r["path"], r["start_line"]) for r in full["results"]]
    assert [(r["path"], r["start_line"]) for r in page["results"]] == key[2:4] and page["offset"] == 2


def test_mcp_search_sees_the_work_tree_marked_and_pages(indexed: Repo, tmp_path: Path) -> None:
    from tests.test_mcp import _drive, _ok

    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "capped_backoff_delay"))  # an edit
    indexed.write("net/cache.py", "def evict_least_recently_used(cache):\n    cache.popitem(last=False)\n")  # new
    (indexed.path / "net/client.py").unlink()  # a deletion
    indexed.git("mv", "http/parser.py", "http/headers.py")  # a rename

    async def body(s) -> None:
        edit = await _ok(s, "search_code", query="capped_backoff_delay", k=3)
        assert (edit["results"][0]["path"], edit["results"][0]["source"]) == ("net/retry.py", "worktree")
        assert "capped_backoff_delay" in edit["results"][0]["snippet"] and edit["worktree_changes"] == 5  # a rename is two
        new = await _ok(s, "search_code", query="evict_least_recently_used", k=3)
        assert (new["results"][0]["path"], new["results"][0]["source"]) == ("net/cache.py", "worktree")
        gone = await _ok(s, "search_code", query="open_connection socket host", k=10)
        assert all(r["path"] != "net/client.py" for r in gone["results"])
        moved = await _ok(s, "search_code", query="parse_header_line", k=10)
        assert moved["results"][0]["path"] == "http/headers.py"
        assert all(r["path"] != "http/parser.py" for r in moved["results"])
        today = await _ok(s, "search_code", query="open_connection socket host", k=10, committed=True)
        assert today["results"][0]["path"] == "net/client.py" and today["results"][0]["source"] == "index"
        full = await _ok(s, "search_code", query="backoff header cache", k=4)
        page = await _ok(s, "search_code", query="backoff header cache", k=2, offset=2)
        assert [r["path"] for r in page["results"]] == [r["path"] for r in full["results"][2:4]]

    _drive(indexed.path, tmp_path, body)


def test_the_daemon_warms_the_overlay_between_asks(indexed: Repo, daemon) -> None:
    """After an overlay ask through the daemon, edits are chunked and embedded in the
    background, so the next ask embeds nothing (the vectors and chunks are ready)."""
    import time

    from gitrag.daemon import client
    from tests.daemonutil import wait_for

    assert _cli(indexed, "backoff_delay")["worktree"]["searched"] is True  # the daemon notes this work tree
    indexed.write("net/retry.py", RETRY + "\n\ndef warmed_ahead_of_the_ask(attempt):\n    return attempt * 3\n")
    edited = time.time()

    def warmed() -> float | None:
        at = client.request("progress", timeout=10, repo=str(indexed.path)).get("worktree_warmed")
        return at if at and at > edited else None

    first = wait_for(warmed, "a warm-up round after the edit", deadline_s=120, every_s=0.2)
    wait_for(lambda: (warmed() or 0) > first, "a second round (begun after the edit)", deadline_s=120, every_s=0.2)
    got = _cli(indexed, "warmed_ahead_of_the_ask")
    assert "warmed_ahead_of_the_ask" in got["results"][0]["symbol"] and got["results"][0]["source"] == "worktree"
    assert got["worktree"]["embedded"] == 0  # done by the warm-up, not by this ask


def test_the_daemon_answers_a_just_appended_function_by_its_name(indexed: Repo, daemon) -> None:
    """Through the daemon, an ask made right after a function is appended to a Go, a
    TypeScript and a Python file (before any warm-up round could cut them) cites the new function under
    its own name and lines, with the new code as its snippet."""
    for language in APPENDED:
        path, body, _, _ = APPENDED[language]
        indexed.write(path, body)
    indexed.commit("go, ts and python")
    index(indexed.path)
    assert _cli(indexed, "zebra")["worktree"]["searched"] is True  # the daemon notes this work tree
    for language in APPENDED:
        path, body, extra, name = APPENDED[language]
        indexed.write(path, body + extra)
        top = _cli(indexed, f"{name} jitter zebra pangolin", "-k", "3")["results"][0]
        text = body + extra
        first = text.splitlines().index(next(x for x in extra.splitlines() if name in x)) + 1
        assert (top["path"], top["symbol"], top["source"]) == (path, name, "worktree")
        assert top["start_line"] in (first - 1, first) and top["end_line"] == len(text.splitlines())
        assert top["snippet"].lstrip().startswith(("//", "export function", "func", "def")) and name in top["snippet"]


def test_worktree_changes_count_files_alike_with_and_without_the_overlay(indexed: Repo) -> None:
    for i in range(3):
        indexed.write(f"newpkg/mod{i}.py", f"def helper_{i}():\n    return {i}\n")  # one untracked folder
    assert _ask(indexed, "helper")["worktree_changes"] == 3 == _ask(indexed, "helper", worktree=False)["worktree_changes"]


def test_a_work_tree_file_name_that_is_not_utf8_never_stops_an_ask(indexed: Repo) -> None:
    """An untracked file whose name is not UTF-8 (bytes 0xff) used to make every ask fail
    with an internal error; now it is counted as a change, the rest of the work tree is
    still searched, and the committed code answers."""
    (indexed.path / os.fsdecode(b"net/odd\xffname.py")).write_bytes(b"def odd_name_helper():\n    return 1\n")
    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "capped_backoff"))
    got = _cli(indexed, "capped_backoff")
    assert got["results"][0]["source"] == "worktree" and got["worktree_changes"] == 2
    assert _cli(indexed, "open_connection", "--committed")["results"][0]["symbol"] == "open_connection"


def test_the_overlay_keeps_the_history_stage(indexed: Repo) -> None:
    """The ranking's ``history`` stage asks its lookup for the similar-fix prior; the overlay's
    lookup wraps the branch's and must pass it on (a dirty work tree used to switch it off)."""
    from gitrag.query.ranking import analyse
    from gitrag.query.retrieval import _Lookup

    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "capped_backoff"))
    indexed.commit("retry: cap the backoff delay")
    index(indexed.path)
    indexed.write("net/client.py", CLIENT + "\n# edited\n")
    with open_workspace(indexed.path) as ws:
        base = _Lookup(ws, ws.repo.branch(), None)
        wrapped = worktree.OverlayLookup(base, worktree.build(ws, ws.state.branch(ws.repo.branch())), None)
        query = analyse("cap the backoff delay")
        assert base.history_prior(query) and wrapped.history_prior(query) == base.history_prior(query)


def _function(name: str, word: str) -> str:
    return (f"def {name}(items, limit=10):\n    \"\"\"Return the {word} of every item, at most limit of them, "
            f"skipping the empty ones.\"\"\"\n    out = []\n    for item in items[:limit]:\n"
            f"        if item:\n            out.append(item.{word})\n    return out\n")


@pytest.mark.parametrize("post_filter", [True, False], ids=["kept-points", "filtered-by-the-store"])
def test_unchanged_chunks_of_an_edited_file_answer_from_their_committed_points(
        indexed: Repo, post_filter: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit of one function hides only that function's committed point: the file's other
    chunks keep answering from the store, as work-tree results with the lines on disk (the
    edit added lines above them), scoring what they score without the overlay. With more
    changed points than POST_FILTER_MAX the store leaves the whole path out and the overlay
    scores every chunk itself: the same answers."""
    if not post_filter:
        monkeypatch.setattr(worktree, "POST_FILTER_MAX", 0)
    first, middle, last = (_function("collect_names", "name"), _function("collect_sizes", "size"),
                           _function("collect_owners_of_tickets", "owner"))
    indexed.write("net/collect.py", f"{first}\n\n{middle}\n\n{last}")
    indexed.commit("collectors")
    index(indexed.path)
    committed = _ask(indexed, "collect_owners_of_tickets owner", mode="dense", worktree=False)["results"][0]
    assert committed["symbol"] == "collect_owners_of_tickets"
    edited = middle.replace("    return out\n", "    out.sort()\n    # sorted by size\n    return out\n")
    indexed.write("net/collect.py", f"{first}\n\n{edited}\n\n{last}")
    with open_workspace(indexed.path) as ws:
        ov = worktree.build(ws, ws.state.branch(ws.repo.branch()))
        if post_filter:
            assert len(ov.hidden_ids) == 1 and len(ov.kept) == 2  # only collect_sizes' point is dropped
        else:
            assert len(ov.hidden_ids) == 3 and not ov.kept and not ov.post_filter
    got = _ask(indexed, "collect_owners_of_tickets owner", mode="dense")["results"][0]
    assert (got["symbol"], got["source"]) == ("collect_owners_of_tickets", "worktree")
    assert got["start_line"] == committed["start_line"] + 2  # the lines on disk
    assert got["snippet"].startswith("def collect_owners_of_tickets")
    assert got["score"] == pytest.approx(committed["score"], abs=0 if post_filter else 1e-3)
    changed = _ask(indexed, "collect_sizes sorted by size", k=10)["results"]
    sizes = [r for r in changed if r["symbol"] == "collect_sizes"]
    assert len(sizes) == 1 and sizes[0]["source"] == "worktree" and "out.sort()" in sizes[0]["snippet"]


def test_provisional_chunks_of_an_edit_are_the_chunkers_and_the_edit_answers(
        indexed: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the daemon (worktree.PROVISIONAL) an ask chunks an edited file from its committed
    chunks (gitrag.query.splice: only the changed range is new, nothing is tokenised): for an
    edit inside one function the chunks are the chunker's own, one chunk is embedded, and
    the edit answers from the work tree; a new untracked file is still cut by the chunker,
    and an exact build (the warm-up) replaces the provisional files."""
    first, middle, last = (_function("collect_names", "name"), _function("collect_sizes", "size"),
                           _function("collect_owners_of_tickets", "owner"))
    indexed.write("net/collect.py", f"{first}\n\n{middle}\n\n{last}")
    indexed.commit("collectors")
    index(indexed.path)
    edited = middle.replace("    return out\n", "    out.sort()\n    # sorted by size\n    return out\n")
    indexed.write("net/collect.py", f"{first}\n\n{edited}\n\n{last}")
    indexed.write("net/fresh.py", _function("collect_colours", "colour"))
    monkeypatch.setattr(worktree, "PROVISIONAL", True)
    shape = lambda ov: {p: [(x["start_line"], x["end_line"], x["chunk_hash"], x["symbol"]) for x in f.payloads]  # noqa: E731 - a one-line view of the overlay, named for the asserts
                        for p, f in ov.files.items()}
    with open_workspace(indexed.path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        quick = worktree.build(ws, branch)
        assert quick.files["net/collect.py"].provisional and not quick.files["net/fresh.py"].provisional
        assert len(quick.hidden_ids) == 1 and len(quick.kept) == 2
        exact = worktree.build(ws, branch, exact=True)
        assert not any(f.provisional for f in exact.files.values())
        assert shape(quick) == shape(exact)
        worktree._cache.clear()
        worktree._hidden_memo.clear()
    got = _ask(indexed, "collect_sizes sorted by size", k=10)
    assert got["worktree"]["embedded"] == 0  # the vectors of both cuts are the same: cached by the builds above
    sizes = [r for r in got["results"] if r["symbol"] == "collect_sizes"]
    assert len(sizes) == 1 and sizes[0]["source"] == "worktree" and "out.sort()" in sizes[0]["snippet"]
    assert any(r["path"] == "net/fresh.py" for r in _ask(indexed, "collect_colours colour", k=3)["results"])


def test_splice_keeps_the_committed_names_and_moves_the_rest() -> None:
    """gitrag.query.splice on its own: an edit inside a function is one new chunk under its
    name, the chunks after it move by the lines the edit added and the definitions are the
    file's own now; a rename, a change no committed chunk touches, and a large one, are left
    to the chunker (None)."""
    from gitrag.index.chunking import analyze
    from gitrag.query.splice import KnownChunk, splice

    old = (_function("collect_names", "name") + "\n\n" + _function("collect_sizes", "size") + "\n\n"
           + _function("collect_owners", "owner")).encode()
    done = analyze("m.py", old)
    committed = [{"start_byte": c.start_byte, "end_byte": c.end_byte, "start_line": c.start_line,
                  "end_line": c.end_line, "symbol": c.symbol, "kind": c.kind, "language": c.language,
                  "chunk_hash": c.hash} for c in done.chunks if c.embeddable]
    graph = json.dumps({"definitions": [{"name": d.name, "kind": d.kind, "start_line": d.start_line,
                                         "end_line": d.end_line, "parent": d.parent} for d in done.definitions]})
    assert [c["symbol"] for c in committed] == ["collect_names", "collect_sizes", "collect_owners"]
    new = old.replace(b"out.append(item.size)", b"out.append(item.size)\n            out.append(item.depth)")
    got = splice("m.py", old, new, committed, graph)
    assert got is not None
    assert [type(c) is KnownChunk for c in got.chunks] == [True, False, True]
    changed = got.chunks[1]
    assert changed.symbol == "collect_sizes" and "item.depth" in changed.text
    assert new[changed.start_byte:changed.end_byte].startswith(b"def collect_sizes")
    moved = got.chunks[2]
    assert (moved.start_line, moved.hash) == (committed[2]["start_line"] + 1, committed[2]["chunk_hash"])
    assert new[moved.start_byte:moved.end_byte] == old[committed[2]["start_byte"]:committed[2]["end_byte"]]
    assert [(d.name, d.start_line) for d in got.definitions] == [
        (d.name, d.start_line + (d.name == "collect_owners")) for d in done.definitions]
    assert splice("m.py", old, new.replace(b"def collect_sizes(", b"def collect_dimensions("), committed, graph) is None
    assert splice("m.py", old, old + b"\n\n# trailing\n", committed[:2], graph) is None  # no chunk touches it
    assert splice("m.py", old, old.replace(b"return out", b"return out\n" + b"    x = 1\n" * 1000, 1), committed,
                  graph) is None


CLASS = (b'import os\n\n\nclass Client:\n    """A client."""\n\n    def send(self, request):\n'
         b'        """Send it."""\n        return request.body\n\n    def close(self):\n        """Close it."""\n'
         b'        return None\n\n\ndef helper(x):\n    return x + 1\n')


@pytest.mark.parametrize("edit, spliced", [
    ((b"        return None\n", b"        return None\n\n    def reopen(self):\n        return 1\n"), False),
    ((b"return request.body", b"return request.body.strip()"), True),
    ((b"    return x + 1\n", b"    return x + 1\n\n\nLIMIT = 3\n"), False),
], ids=["method-appended-to-a-class", "edit-inside-a-method", "module-constant-appended"])
def test_splice_reads_the_definitions_around_the_change(edit: tuple[bytes, bytes], spliced: bool) -> None:
    """The definitions are read from the changed region with the definitions around it (a
    method's class): a method appended to a class or a new module constant is left to the
    chunker; an edit inside a method is spliced with the chunker's definitions."""
    from gitrag.index.chunking import analyze
    from gitrag.query.splice import splice

    done = analyze("c.py", CLASS)
    committed = [{"start_byte": c.start_byte, "end_byte": c.end_byte, "start_line": c.start_line,
                  "end_line": c.end_line, "symbol": c.symbol, "kind": c.kind, "language": c.language,
                  "chunk_hash": c.hash} for c in done.chunks if c.embeddable]
    graph = [{"name": d.name, "kind": d.kind, "start_line": d.start_line, "end_line": d.end_line, "parent": d.parent}
             for d in done.definitions]
    new = CLASS.replace(*edit)
    got = splice("c.py", CLASS, new, committed, graph)
    assert (got is not None) == spliced
    if got is not None:
        exact = analyze("c.py", new)
        assert [(d.name, d.start_line, d.end_line) for d in got.definitions] == [
            (d.name, d.start_line, d.end_line) for d in exact.definitions]
        assert [(c.start_line, c.end_line, c.symbol) for c in got.chunks] == [
            (c.start_line, c.end_line, c.symbol) for c in exact.chunks if c.embeddable]


# An edited file of each language and the same file with a function appended after its last
# one (the last chunk's end is where the insertion starts: it borders that chunk only).
APPENDED = {
    "python": ("util/delay.py", "def delay(ms, signal=None):\n    \"\"\"Sleep ms milliseconds unless aborted.\"\"\"\n"
               "    if signal is not None and signal.aborted:\n        raise signal.reason\n"
               "    time.sleep(ms / 1000)\n",
               "\n\ndef jitter_pangolin(ms):\n    \"\"\"Pangolin jitter around ms.\"\"\"\n"
               "    return ms * (0.5 + random.random())\n", "jitter_pangolin"),
    "typescript": ("source/utils/delay.ts", "export type DelayOptions = {\n\tsignal?: AbortSignal;\n};\n\n"
                   "export default async function delay(\n\tms: number,\n\t{signal}: DelayOptions,\n"
                   "): Promise<void> {\n\treturn new Promise((resolve, reject) => {\n"
                   "\t\tsignal?.throwIfAborted();\n\t\tconst timeoutId = setTimeout(resolve, ms);\n"
                   "\t\tsignal?.addEventListener('abort', () => {\n\t\t\tclearTimeout(timeoutId);\n"
                   "\t\t\treject(signal.reason as Error);\n\t\t}, {once: true});\n\t});\n}",
                   "\n\nexport function jitterPangolin(ms: number): number {\n"
                   "\treturn ms * (0.5 + Math.random()); // pangolin jitter\n}\n", "jitterPangolin"),
    "go": ("cobra.go", "package cobra\n\nimport \"io\"\n\n// CheckErr prints the msg with the prefix 'Error:' and exits.\n"
           "func CheckErr(msg interface{}) {\n\tif msg != nil {\n\t\tpanic(msg)\n\t}\n}\n\n"
           "// WriteStringAndCheck writes a string into a buffer and checks the error.\n"
           "func WriteStringAndCheck(b io.StringWriter, s string) {\n\t_, err := b.WriteString(s)\n"
           "\tCheckErr(err)\n}\n",
           "\n// zebraStripeRows shades every second row of a table.\nfunc zebraStripeRows(rows []string) []string {\n"
           "\tfor i := 1; i < len(rows); i += 2 {\n\t\trows[i] = \"zebra \" + rows[i]\n\t}\n\treturn rows\n}\n",
           "zebraStripeRows"),
}


@pytest.mark.parametrize("language", sorted(APPENDED))
def test_a_function_appended_answers_at_once_under_its_own_name(
        indexed: Repo, language: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon's first ask right after a new function is appended to a file (its
    provisional cut, worktree.PROVISIONAL) names and bounds it as the chunker does, never as
    the previous function with a range that runs over both; an edit inside a function is
    still cut provisionally, and the same as the chunker."""
    path, body, extra, name = APPENDED[language]
    indexed.write(path, body)
    indexed.commit(f"{language} file")
    index(indexed.path)
    indexed.write(path, body + extra)
    monkeypatch.setattr(worktree, "PROVISIONAL", True)
    shape = lambda ov: [(x["start_line"], x["end_line"], x["symbol"]) for x in ov.files[path].payloads]  # noqa: E731 - a one-line view of the overlay, named for the asserts
    with open_workspace(indexed.path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        quick = worktree.build(ws, branch)
        exact = worktree.build(ws, branch, exact=True)
        assert shape(quick) == shape(exact)
        assert shape(quick)[-1][2] == name
        start = (body + extra).splitlines().index(next(x for x in extra.splitlines() if name in x)) + 1
        worktree._cache.clear()
        got = ask(ws, f"{name} jitter zebra pangolin", k=3, worktree_overlay=True).to_json()["results"][0]
    assert (got["path"], got["symbol"], got["source"]) == (path, name, "worktree")
    assert got["start_line"] <= start and got["end_line"] == len((body + extra).splitlines())
    assert name in got["snippet"] and "delay(" not in got["snippet"] and "WriteString" not in got["snippet"]
    indexed.write(path, body.replace("ms", "millis", 1) if language != "go" else body.replace("panic(msg)", "panic(msg) // fatal"))
    with open_workspace(indexed.path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        quick = worktree.build(ws, branch)
        assert quick.files[path].provisional  # an edit inside a function: no chunker on the ask
        assert shape(quick) == shape(worktree.build(ws, branch, exact=True))


def test_files_committed_since_the_index_are_embedded_only_until_the_deadline(indexed: Repo, capsys) -> None:
    """Mid-sync (the daemon's ask past its wait) HEAD's files not indexed yet are not embedded
    inside the request: they are counted as not searched, and an uncommitted edit still answers."""
    import time

    from gitrag.daemon.routing import response_from_json
    from gitrag.surfaces.commands import ask as ask_command

    for i in range(3):
        indexed.write(f"jobs/task_{i}.py", f"def scheduled_task_{i}(queue):\n    return queue.pop({i})\n")
    indexed.commit("tasks")  # committed, not indexed
    indexed.write("net/retry.py", RETRY.replace("backoff_delay", "capped_backoff_delay"))  # an edit
    with open_workspace(indexed.path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        late = worktree.build(ws, branch, deadline=time.monotonic())
        assert (late.late, sorted(late.files)) == (3, ["net/retry.py"])
        assert not late.unindexed and "jobs/task_0.py" not in late.hidden
        whole = worktree.build(ws, branch)
        assert whole.late == 0 and whole.unindexed == {f"jobs/task_{i}.py" for i in range(3)}
        assert late.late == 3  # the deadline left only those out; now cached, a later ask finds them at once
        cached = worktree.build(ws, branch, deadline=time.monotonic())
        assert cached.late == 0 and cached.unindexed == whole.unindexed
    for i in range(3, 5):
        indexed.write(f"jobs/task_{i}.py", f"def scheduled_task_{i}(queue):\n    return queue.pop({i})\n")
    indexed.commit("more tasks", "jobs")
    got = _ask(indexed, "scheduled_task queue pop capped_backoff_delay", k=10, deadline=time.monotonic())
    assert got["worktree"]["late"] == 2 and got["worktree"]["in_head"] == 3
    assert {r["path"] for r in got["results"]} >= {"net/retry.py", "jobs/task_0.py"}
    assert not any(r["path"] in ("jobs/task_3.py", "jobs/task_4.py") for r in got["results"])
    ask_command._print(response_from_json(got), snippets=False)
    assert "2 file(s) committed since the index not searched yet" in capsys.readouterr().out


@pytest.mark.parametrize("config", [True, False])
def test_a_bare_clone_has_no_work_tree_even_without_its_config(indexed: Repo, tmp_path: Path, config: bool) -> None:
    """libgit2 takes the parent folder of a bare git dir whose ``config`` is gone for its work
    tree; git does not: nothing of the folder around it is searched."""
    from gitrag.git.repo import GitRepo

    host = tmp_path / "host"
    bare = host / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(indexed.path), str(bare)], check=True)
    (host / "stray.py").write_text("def jittered_stray_helper():\n    return 1\n")
    if not config:
        (bare / "config").unlink()
    assert GitRepo(bare).workdir is None
    index(bare)
    with open_workspace(bare) as ws:
        got = ask(ws, "jittered_stray_helper backoff_delay", k=5, worktree_overlay=True).to_json()
    assert got["worktree_changes"] == 0 and got["worktree"]["files"] == 0
    assert {r["source"] for r in got["results"]} == {"index"} and "net/retry.py" in {r["path"] for r in got["results"]}
def test_only_an_asks_exact_build_counts_as_a_warm_up_round(indexed: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """worktree.settled_since, which lets the daemon skip a warm-up round: an ask's build
    with every file chunked exactly counts from the moment it began; one that cut an edit
    provisionally does not (the round must still chunk it exactly), nor does the warm-up's own."""
    import time

    monkeypatch.setattr(worktree, "PROVISIONAL", True)
    monkeypatch.setattr(worktree, "_settled", {})
    with open_workspace(indexed.path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        root = str(ws.repo.root)
        before = time.monotonic()
        worktree.build(ws, branch)  # a clean tree: nothing to cut
        assert worktree.settled_since(root, before)
        assert not worktree.settled_since(root, time.monotonic())
        indexed.write("net/retry.py", RETRY.replace("min(2 ** attempt, 60)", "min(3 ** attempt, 90)"))
        edited = time.monotonic()
        assert worktree.build(ws, branch).files["net/retry.py"].provisional
        assert not worktree.settled_since(root, edited)
        worktree.build(ws, branch, exact=True)  # the warm-up's exact cut, now cached for the next ask
        assert not worktree.build(ws, branch, exact=False, warming=True).files["net/retry.py"].provisional
        assert not worktree.settled_since(root, edited)  # the warm-up's own builds do not count
        again = time.monotonic()
        assert not worktree.build(ws, branch).files["net/retry.py"].provisional
        assert worktree.settled_since(root, again)


def test_the_warm_up_waits_while_a_sync_of_its_work_tree_is_queued(indexed: Repo) -> None:
    """gitrag.daemon.warm: a round is skipped while the daemon has a sync of the work tree
    queued (a hook's event, not drained yet): the sync cuts the same commit's files. Once
    nothing is queued the next round warms it."""
    import asyncio

    from gitrag.daemon.service import Service

    service = Service()
    worker, root = service.worker_for(indexed.path)
    try:
        service.warmer.note(root)
        indexed.write("net/retry.py", RETRY + "\n\ndef queued_edit(attempt):\n    return attempt\n")
        worker.mark(root)  # what a hook's event does; nothing drains it here
        assert worker.catching_up(root) is not None
        asyncio.run(service.warmer.run(service))
        assert root not in service.warmer.warmed and root not in service.warmer.began
        worker.dirty.clear()  # the sync ran
        asyncio.run(service.warmer.run(service))
        assert root in service.warmer.warmed
    finally:
        worker.close()
