"""The sync engine on scripted real git histories (issue 4).

Every scenario ends by comparing the branch's points (ids and payloads, in the manifest
and in the store) with a from-scratch index of the same commit made in another GITRAG_HOME.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gitrag.index.workspace import open_workspace
from tests.gitutil import Repo
from tests.gitutil import index as sync

FUNCS = {
    "alpha": "def alpha(x):\n    \"\"\"Double x.\"\"\"\n    return x * 2\n",
    "beta": "def beta(items):\n    total = 0\n    for item in items:\n        total += item\n    return total\n",
    "gamma": "class Gamma:\n    def run(self, n):\n        return [i * i for i in range(n)]\n",
}


def module(*names: str, header: str = "") -> str:
    return header + "\n\n".join(FUNCS[n] for n in names)


def snapshot(path: Path) -> dict[str, dict[str, Any]]:
    """{point id: payload} of the current branch; asserts the branch's view of the store holds
    exactly its manifest, and the collection exactly the points some branch holds."""
    with open_workspace(path) as ws:
        branch = ws.state.branch(ws.repo.branch())
        assert branch is not None
        rows = {r.point_id: r.payload for r in ws.state.points(branch.name)}
        assert ws.store.ids(branch.collection, branch=branch.view) == set(rows), "store and manifest disagree"
        assert ws.store.ids(branch.collection) == set(ws.state.members(branch.fingerprint)), "orphan points"
        return rows


def fresh_snapshot(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Index the same commit from scratch in another GITRAG_HOME."""
    old = os.environ["GITRAG_HOME"]
    monkeypatch.setenv("GITRAG_HOME", str(tmp_path / "scratch-home"))
    try:
        sync(path)
        return snapshot(path)
    finally:
        monkeypatch.setenv("GITRAG_HOME", old)


def assert_converged(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert snapshot(repo.path) == fresh_snapshot(repo.path, tmp_path, monkeypatch)


@pytest.fixture
def base(repo: Repo) -> Repo:
    repo.write("pkg/a.py", module("alpha", "beta"))
    repo.write("pkg/b.py", module("gamma"))
    repo.write("README.md", "# Demo\n\nA demo project.\n")
    repo.commit("initial")
    first = sync(repo.path)
    assert first.chunks_embedded > 0 and first.files_indexed == 3
    return repo


def test_second_run_embeds_nothing(base: Repo) -> None:
    again = sync(base.path)
    assert (again.chunks_embedded, again.points_upserted, again.points_deleted) == (0, 0, 0)
    assert again.chunks_total == len(snapshot(base.path))


def test_one_function_edited_embeds_one_chunk(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.write("pkg/a.py", module("alpha", "beta").replace("return x * 2", "return x * 3"))
    base.commit("edit alpha")
    s = sync(base.path)
    assert s.chunks_embedded == 1
    assert s.files_indexed == 1
    assert_converged(base, tmp_path, monkeypatch)


def test_line_added_above_moves_lines_without_embedding(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = {p["chunk_hash"]: p for p in snapshot(base.path).values() if p["path"] == "pkg/a.py"}
    base.write("pkg/a.py", "\n\n" + module("alpha", "beta"))
    base.commit("blank lines on top")
    s = sync(base.path)
    # a point is an occurrence (path, blob, byte range, text): moved lines are new points, from the cache
    assert s.chunks_embedded == 0 and s.points_upserted == s.points_deleted == len(before)
    after = {p["chunk_hash"]: p for p in snapshot(base.path).values() if p["path"] == "pkg/a.py"}
    assert set(after) == set(before)
    assert all(after[h]["end_line"] == before[h]["end_line"] + 2 for h in before)
    assert all(after[h]["start_line"] == before[h]["start_line"] + 2 for h in before if before[h]["start_line"] > 1)
    assert_converged(base, tmp_path, monkeypatch)


def test_rename_embeds_nothing_and_drops_old_path(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.git("mv", "pkg/b.py", "pkg/renamed.py")
    base.commit("rename")
    s = sync(base.path)
    assert s.chunks_embedded == 0
    paths = {p["path"] for p in snapshot(base.path).values()}
    assert "pkg/renamed.py" in paths and "pkg/b.py" not in paths
    assert_converged(base, tmp_path, monkeypatch)


def test_rename_over_a_missing_blob_syncs(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted file's blob gone from the object database (a partial clone, a mirror without
    its largest blobs): rename detection cannot read it; the sync still applies the change
    (it crashed with pygit2's NotFoundError "cannot read header" in find_similar)."""
    old_blob = base.git("rev-parse", "HEAD:pkg/b.py")
    base.git("mv", "pkg/b.py", "pkg/moved.py")
    base.write("pkg/moved.py", module("gamma", "alpha"))  # a similar, not identical, file: similarity is computed
    base.commit("move and edit b")
    loose = base.path / ".git" / "objects" / old_blob[:2] / old_blob[2:]
    assert loose.is_file()
    loose.unlink()
    sync(base.path)
    paths = {p["path"] for p in snapshot(base.path).values()}
    assert "pkg/moved.py" in paths and "pkg/b.py" not in paths
    assert_converged(base, tmp_path, monkeypatch)


def test_revert_embeds_nothing(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.write("pkg/a.py", module("alpha", "beta").replace("total = 0", "total = 1"))
    base.commit("break beta")
    assert sync(base.path).chunks_embedded == 1
    base.git("revert", "--no-edit", "HEAD")
    s = sync(base.path)
    assert s.chunks_embedded == 0
    assert_converged(base, tmp_path, monkeypatch)


def test_new_branch_starts_from_its_ancestor(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.git("checkout", "-q", "-b", "feature/ünï-🚀")
    base.write("pkg/c.py", "def delta(s):\n    return s.upper()\n")
    base.commit("add delta")
    s = sync(base.path)
    assert s.started_from == "main"
    assert s.chunks_embedded == 1
    assert_converged(base, tmp_path, monkeypatch)
    base.git("checkout", "-q", "main")
    assert sync(base.path).chunks_embedded == 0
    assert "pkg/c.py" not in {p["path"] for p in snapshot(base.path).values()}


def test_twenty_commit_rebase_equals_full_index(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.git("checkout", "-q", "-b", "topic")
    for i in range(20):
        base.write(f"pkg/gen{i % 5}.py", f"def gen_{i}(v):\n    return v + {i}\n")
        base.commit(f"topic {i}")
    sync(base.path)
    base.git("checkout", "-q", "main")
    base.write("pkg/a.py", module("alpha", "beta", header="import os\n\n"))
    base.commit("main moves")
    base.git("checkout", "-q", "topic")
    base.git("rebase", "-q", "main")
    sync(base.path)
    assert_converged(base, tmp_path, monkeypatch)


def test_merge_equals_full_index(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.git("checkout", "-q", "-b", "side")
    base.write("pkg/side.py", "def side():\n    return 'side'\n")
    base.commit("side")
    base.git("checkout", "-q", "main")
    base.write("pkg/b.py", module("gamma").replace("i * i", "i + i"))
    base.commit("main edit")
    sync(base.path)
    base.git("merge", "-q", "--no-edit", "side")
    sync(base.path)
    assert_converged(base, tmp_path, monkeypatch)


def test_force_push_with_unreachable_old_commit(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.write("pkg/tmp.py", "def temporary():\n    return 1\n")
    base.commit("to be dropped")
    sync(base.path)
    base.git("reset", "-q", "--hard", "HEAD~1")
    base.git("reflog", "expire", "--expire=now", "--all")
    base.git("gc", "-q", "--prune=now")
    base.write("pkg/a.py", module("beta"))
    base.commit("rewritten")
    sync(base.path)
    assert "pkg/tmp.py" not in {p["path"] for p in snapshot(base.path).values()}
    assert_converged(base, tmp_path, monkeypatch)


def test_deleted_file_points_are_pruned(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.git("rm", "-q", "pkg/b.py")
    base.commit("delete b")
    s = sync(base.path)
    assert s.files_deleted == 1 and s.points_deleted >= 1
    assert_converged(base, tmp_path, monkeypatch)


def test_gitragignore_change_reapplies_policy(base: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base.write(".gitragignore", "pkg/b.py\n")
    base.commit("ignore b")
    s = sync(base.path)
    assert {"path": "pkg/b.py", "reason": "in .gitragignore"} in s.skipped
    assert "pkg/b.py" not in {p["path"] for p in snapshot(base.path).values()}
    assert_converged(base, tmp_path, monkeypatch)


def test_detached_head_is_indexed_as_its_own_view(base: Repo) -> None:
    first = base.head()
    base.write("pkg/c.py", "def later():\n    return 2\n")
    base.commit("later")
    sync(base.path)
    base.git("checkout", "-q", "--detach", first)
    s = sync(base.path)
    assert s.branch == "(HEAD detached)" and s.commit == first
    assert s.started_from == "main" and s.chunks_embedded == 0
    assert "pkg/c.py" not in {p["path"] for p in snapshot(base.path).values()}


def test_a_branch_named_detached_is_not_the_detached_head(base: Repo) -> None:
    """git lets a branch be named ``(detached)``, the detached view's old name: it is a branch
    of its own, and a detached HEAD elsewhere never shows its files (or it the HEAD's)."""
    first = base.head()
    base.git("checkout", "-q", "-b", "(detached)")
    base.write("pkg/only_on_branch.py", "def on_the_branch():\n    return 3\n")
    branch_head = base.commit("on the branch named (detached)")
    on_branch = sync(base.path)
    assert (on_branch.branch, on_branch.commit) == ("(detached)", branch_head)
    base.git("checkout", "-q", "--detach", first)
    detached = sync(base.path)
    assert "pkg/only_on_branch.py" not in {p["path"] for p in snapshot(base.path).values()}
    base.git("checkout", "-q", "(detached)")
    again = sync(base.path)
    assert again.previous_commit == branch_head and again.points_upserted == again.points_deleted == 0
    assert "pkg/only_on_branch.py" in {p["path"] for p in snapshot(base.path).values()}
    assert detached.branch == "(HEAD detached)" and detached.commit == first
    with open_workspace(base.path) as ws:
        assert {b.name for b in ws.state.branches()} == {"main", "(detached)", "(HEAD detached)"}
        assert ws.state.branch("(HEAD detached)").indexed_commit == first


def test_the_old_detached_view_is_forgotten_once(base: Repo) -> None:
    """A state written before the rename holds the detached HEAD's view as ``(detached)``, which
    a real branch of that name would have shared: the next sync forgets it, once, and the branch
    starts again from its nearest indexed branch (nothing embedded)."""
    import sqlite3

    from gitrag.git import repo as repo_mod

    first = base.head()
    base.write("pkg/c.py", module("gamma", header="# later\n"))
    base.commit("later")
    sync(base.path)
    base.git("checkout", "-q", "--detach", first)
    with pytest.MonkeyPatch.context() as older:
        older.setattr(repo_mod, "DETACHED", "(detached)")  # as the older gitrag named the view
        old = sync(base.path)
    assert old.branch == "(detached)"
    with open_workspace(base.path) as ws:
        db_path = ws.state.path
    with sqlite3.connect(db_path) as db:  # an older gitrag wrote no such note
        db.execute("DELETE FROM meta WHERE key='detached_view'")
    db.close()
    base.git("checkout", "-q", "-b", "(detached)", "main")  # a real branch of that name, at main's tip
    s = sync(base.path)
    assert s.branch == "(detached)" and s.started_from == "main" and s.chunks_embedded == 0
    assert "pkg/c.py" in {p["path"] for p in snapshot(base.path).values()}  # main's files, not the old view's
    with open_workspace(base.path) as ws:
        assert ws.state.meta("detached_view") == "(HEAD detached)"
        assert ws.state.branch("(detached)").indexed_commit == base.head()
    again = sync(base.path)  # once: the branch's own view is kept from now on
    assert again.previous_commit == base.head() and again.started_from is None


def test_a_branch_not_checked_out_is_synced_to_its_tip(base: Repo, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.errors import BranchGone

    base.write("pkg/c.py", "def delta(s):\n    return s.upper()\n")
    tip = base.commit("add delta")
    base.git("checkout", "-q", "-b", "feature/ünï", "HEAD~1")  # HEAD and the work tree elsewhere
    assert not (base.path / "pkg/c.py").exists()
    s = sync(base.path, branch="main")
    assert (s.branch, s.commit, s.chunks_embedded, s.files_indexed) == ("main", tip, 1, 1)
    with pytest.raises(BranchGone, match="no/such/ünï"):
        sync(base.path, branch="no/such/ünï")
    with open_workspace(base.path) as ws:
        assert ws.state.branch("no/such/ünï") is None and ws.state.branch("feature/ünï") is None
    base.git("checkout", "-q", "main")
    again = sync(base.path)  # the checked-out sync finds main already at its tip
    assert (again.previous_commit, again.chunks_embedded, again.points_upserted) == (tip, 0, 0)
    assert_converged(base, tmp_path, monkeypatch)


def test_dropped_collection_is_rebuilt_without_embedding(base: Repo) -> None:
    with open_workspace(base.path) as ws:
        branch = ws.state.branch("main")
        assert branch is not None
        ws.store.drop_collection(branch.collection)
    s = sync(base.path)
    assert s.chunks_embedded == 0
    assert len(snapshot(base.path)) == s.chunks_total > 0


def test_embedder_mismatch_is_refused_then_rebuilt(base: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.errors import EmbedderMismatch
    from gitrag.index.embedders import register
    from gitrag.index.embedders.hashing import HashEmbedder

    register("hash128")(lambda settings: HashEmbedder(dim=128))
    monkeypatch.setenv("GITRAG_EMBEDDER", "hash128")
    with pytest.raises(EmbedderMismatch, match="--rebuild"):
        sync(base.path)
    s = sync(base.path, rebuild=True)
    assert s.chunks_embedded > 0
    assert len(snapshot(base.path)) == s.chunks_total


def test_new_pipeline_version_rechunks_and_rewrites_every_point(base: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    import gitrag.index.indexer

    before = snapshot(base.path)
    monkeypatch.setattr(gitrag.index.indexer, "PIPELINE_VERSION", "next")
    s = sync(base.path)
    assert s.files_indexed == 3 and s.chunks_embedded == 0  # same texts: all from the cache
    after = snapshot(base.path)
    assert s.points_upserted == s.points_deleted == len(before)  # every point rewritten, under new ids
    assert not set(after) & set(before)
    assert sorted(map(str, after.values())) == sorted(map(str, before.values()))
    again = sync(base.path)
    assert again.files_indexed == 0


def test_gc_forgets_deleted_branches_and_unreferenced_vectors(base: Repo) -> None:
    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    base.git("checkout", "-q", "-b", "doomed")
    base.write("pkg/only_here.py", "def only_here():\n    return 'x'\n")
    base.commit("doomed work")
    sync(base.path)
    base.git("checkout", "-q", "main")
    base.git("branch", "-q", "-D", "doomed")
    result = CliRunner().invoke(cli, ["gc", "--repo", str(base.path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["deleted"] == ["doomed"] and data["vectors_deleted"] >= 1
    with open_workspace(base.path) as ws:
        assert [b.name for b in ws.state.branches()] == ["main"]
        assert not [c for c in ws.store.list_collections() if "doomed" in c]


def test_raising_max_file_bytes_indexes_files_skipped_before(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("big.py", "def big():\n    return '" + "x" * 400 + "'\n")
    repo.write("small.py", "def small():\n    return 1\n")
    repo.commit("sizes")
    monkeypatch.setenv("GITRAG_MAX_FILE_BYTES", "200")
    first = sync(repo.path)
    assert first.skipped == [{"path": "big.py", "reason": "larger than 200 bytes"}]
    monkeypatch.setenv("GITRAG_MAX_FILE_BYTES", "100000")
    second = sync(repo.path)
    assert "big.py" in {p["path"] for p in snapshot(repo.path).values()} and second.skipped == []


def test_a_sync_in_one_point_batches_equals_one_in_a_single_batch(base: Repo, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Streaming: batches of one new point each (edits, a deletion, a rename, new files,
    a skipped file) write what one batch writes, and the branch ends at HEAD."""
    from gitrag.index import indexer

    base.write("pkg/a.py", module("alpha", "beta").replace("return x * 2", "return x * 5"))
    base.git("rm", "-q", "README.md")
    base.git("mv", "pkg/b.py", "pkg/b2.py")
    for k in range(3):
        base.write(f"pkg/new_{k}.py", module("alpha", "gamma").replace("alpha", f"alpha_{k}"))
    base.write("pkg/blob.bin", "\0binary\0")
    head = base.commit("many kinds of change")
    monkeypatch.setattr(indexer, "BATCH_CHUNKS", 1)
    calls: list[int] = []
    real = indexer.state_mod.State.commit_batch

    def counted(self: Any, branch: str, updates: Any, chunker: str) -> None:
        calls.append(len(updates))
        real(self, branch, updates, chunker)

    monkeypatch.setattr(indexer.state_mod.State, "commit_batch", counted)
    summary = sync(base.path)
    assert len(calls) >= 4 and summary.commit == head  # several batches, then the final commit
    with open_workspace(base.path) as ws:
        assert ws.state.branch("main").indexed_commit == head and not ws.state.journal_paths("main")
    monkeypatch.setattr(indexer, "BATCH_CHUNKS", 2048)
    assert_converged(base, tmp_path, monkeypatch)


def test_progress_of_a_batched_sync_counts_the_whole_sync(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embed and store counts of a sync in several batches add up over the batches
    (a new user saw 'writing points 1,024/1,743' for a first index of 4,422 chunks); their
    total is unknown (progress.UNKNOWN) until the last batch is chunked and the whole sync's
    from then on: a projection from the batches so far grew as bigger files came, and its
    percentage fell ('26,585/59,929, 44%', then '27,097/68,294, 39%')."""
    from gitrag.index import indexer
    from gitrag.index.indexer import Indexer
    from gitrag.progress import UNKNOWN

    for k in range(6):
        repo.write(f"pkg/m{k}.py", f"def f{k}(x):\n    return x + {k}\n\n\ndef g{k}(y):\n    return y * {k}\n")
    repo.commit("six modules")
    monkeypatch.setattr(indexer, "BATCH_CHUNKS", 2)
    seen: dict[str, list[tuple[int, int]]] = {}
    with open_workspace(repo.path) as ws:
        summary = Indexer(ws, progress=lambda stage, done, total: seen.setdefault(stage, []).append((done, total))).sync()
    assert summary.chunks_embedded >= 6 and summary.points_upserted >= 6
    for stage, want in (("embed", summary.chunks_embedded), ("store", summary.points_upserted)):
        reports = seen[stage]
        assert [d for d, _ in reports] == sorted(d for d, _ in reports), stage  # never goes back
        assert reports[-1] == (want, want), (stage, reports[-3:], want)
        totals = [t for _, t in reports]
        known = totals.index(want)  # unknown before, exact after: a total never changes once given
        assert known > 0 and set(totals[:known]) == {UNKNOWN} and set(totals[known:]) == {want}, (stage, reports)


def test_the_index_summary_parts_add_up_to_its_chunks(repo: Repo) -> None:
    """A new user read "2708 chunks (2533 embedded, 1 from cache)": the rest were chunks whose
    text repeats another (embedded once). Every part is named, on a first index and a later one."""
    import re

    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    same = 'def same():\n    """Identical in three files."""\n    return 42\n'
    for i in range(3):
        repo.write(f"copy_{i}.py", same)
    repo.write("unique.py", "def unique():\n    return 1\n")
    repo.commit("three copies and one")

    def run() -> tuple[dict[str, Any], str]:
        text = CliRunner().invoke(cli, ["index", "--repo", str(repo.path)], catch_exceptions=False).stdout
        got = re.search(r"(\d+) chunks \(([^)]*)\)", text)
        assert got, text
        parts = {name: int(n) for n, name in re.findall(r"(\d+) ([a-z][a-z ]*)", got.group(2))}
        assert sum(parts.values()) == int(got.group(1)), text
        return parts, text

    first, _ = run()
    assert first == {"embedded": 2, "from cache": 0, "repeats of another chunk": 2}
    repo.write("unique.py", "def unique():\n    return 2\n")
    repo.write("other.py", "def other():\n    return 3\n")
    repo.commit("one changed, one new")
    later, _ = run()
    assert later == {"embedded": 2, "from cache": 0, "unchanged": 3}
    repo.write("again.py", same)  # its vector is in the cache from the first index
    repo.commit("a fourth copy")
    data = json.loads(CliRunner().invoke(cli, ["index", "--repo", str(repo.path), "--json"],
                                         catch_exceptions=False).stdout)
    assert (data["chunks_embedded"], data["chunks_reused"], data["chunks_repeated"]) == (0, 1, 0)
    assert data["chunks_total"] == 6
