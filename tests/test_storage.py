"""Storage that grows with distinct code (issue 15), on real repositories and both stores.

* one collection per (repository, embedder) shared by every branch: a branch never sees
  another branch's code, and after branch switches, merges, deletions and gc every
  branch's view equals a from-scratch index of its commit (lost = wrong = 0), embedded
  Qdrant Edge and qdrant-client (local mode on disk) alike;
* a repository's index is keyed by the id in its git dir: a moved folder answers at once,
  a second clone embeds nothing (the vector cache is shared), a ``cp -a`` copy forks;
* ``gitrag gc`` drops the data folders of repositories that no longer exist;
* an index built by the previous release (format 1, per-branch collections; made by that
  release's own code, taken from this repository's history) is converted on first use
  with no embedding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gitrag import config, identity
from gitrag.git.repo import GitRepo
from gitrag.index.state import State
from gitrag.index.workspace import open_workspace
from gitrag.query.retrieval import search
from tests.gitutil import Repo, index, project_git, project_package_at
from tests.reliability import compare, functions, points

BACKENDS = ["embedded", "server"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The store of this test: the embedded engine, or qdrant-client's local mode on disk."""
    if request.param == "server":
        monkeypatch.setenv("GITRAG_QDRANT_URL", f"path:{tmp_path / 'qdrant-server'}")
    return str(request.param)


def paths_found(repo: Path, question: str, mode: str = "sparse") -> list[str]:
    with open_workspace(repo) as ws:
        return [r.path for r in search(ws, question, k=20, mode=mode, snippets=False)]


def fresh_points(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> tuple:
    """What a from-scratch index of the same commit holds, in another home (and server)."""
    n = len(list(tmp_path.glob("scratch-*")))
    home = tmp_path / f"scratch-{n}"
    with monkeypatch.context() as m:
        m.setenv("GITRAG_HOME", str(home))
        if backend == "server":
            m.setenv("GITRAG_QDRANT_URL", f"path:{home / 'qdrant-server'}")
        (Path(repo) / ".git" / "gitrag-id").rename(home.with_suffix(".id"))  # a scratch id too
        try:
            index(repo)
            return points(repo)
        finally:
            home.with_suffix(".id").replace(Path(repo) / ".git" / "gitrag-id")


def lost_wrong(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> tuple[int, int]:
    return compare(points(repo.path), fresh_points(repo.path, tmp_path, monkeypatch, backend))


def test_a_chunk_only_on_one_branch_never_answers_on_another(repo: Repo, backend: str) -> None:
    repo.write("pkg/shared.py", functions("shared", 3))
    repo.commit("shared")
    index(repo.path)
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("pkg/only_feature.py", functions("zebraquux", 2))
    repo.commit("feature only")
    assert index(repo.path).chunks_embedded == 2
    assert "pkg/only_feature.py" in paths_found(repo.path, "zebraquux_1")
    repo.git("checkout", "-q", "main")
    index(repo.path)
    for mode in ("sparse", "dense", "hybrid"):
        found = paths_found(repo.path, "zebraquux_1 zebraquux_0", mode)
        assert "pkg/only_feature.py" not in found, (mode, found)
        assert found or mode == "sparse"  # no term of the question is on main
    with open_workspace(repo.path) as ws:
        main, feature = ws.state.branch("main"), ws.state.branch("feature")
        from gitrag.index.sparse import query_vector
        unfiltered = ws.store.search(main.collection, dense=None, sparse=query_vector("zebraquux_1"),
                                     limit=5, branch=None)
        assert {h.payload["path"] for h in unfiltered} == {"pkg/only_feature.py"}  # it is in the collection
        assert main is not None and feature is not None and main.collection == feature.collection  # one collection
        assert ws.store.count(main.collection) == ws.state.point_count("feature")  # shared points stored once
        assert ws.store.count(main.collection, branch=main.view) == ws.state.point_count("main")
        assert ws.store.count(main.collection, branch=feature.view) == ws.state.point_count("feature")


def test_branch_switches_merges_deletions_and_gc_equal_from_scratch(
        repo: Repo, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    repo.write("pkg/a.py", functions("alpha", 4))
    repo.write("pkg/b.py", functions("beta", 3))
    repo.commit("A")
    index(repo.path)
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("pkg/a.py", "import os\n\n" + functions("alpha", 4))  # lines move: new occurrences
    repo.write("pkg/t.py", functions("topic", 2))
    repo.commit("topic")
    index(repo.path)
    repo.git("checkout", "-q", "-b", "doomed", "main")
    repo.write("pkg/doomed.py", functions("doomed", 2))
    repo.git("rm", "-q", "pkg/b.py")
    repo.commit("doomed")
    index(repo.path)
    repo.git("checkout", "-q", "main")
    repo.write("pkg/b.py", functions("beta", 3).replace("value * 2 +", "value * 22 +"))
    repo.commit("main edits b")
    index(repo.path)
    repo.git("merge", "-q", "--no-edit", "topic")
    index(repo.path)
    assert lost_wrong(repo, tmp_path, monkeypatch, backend) == (0, 0)
    repo.git("branch", "-q", "-D", "doomed")
    result = CliRunner().invoke(cli, ["gc", "--repo", str(repo.path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["deleted"] == ["doomed"]
    assert "pkg/doomed.py" not in paths_found(repo.path, "doomed_1")
    assert lost_wrong(repo, tmp_path, monkeypatch, backend) == (0, 0)
    repo.git("checkout", "-q", "topic")
    index(repo.path)
    assert lost_wrong(repo, tmp_path, monkeypatch, backend) == (0, 0)
    ws = open_workspace(repo.path)
    try:  # every stored point is held by a branch, and every branch sees exactly its manifest
        from gitrag.index.views import expected

        coll = ws.state.branch("topic").collection
        assert ws.store.ids(coll) == set(expected(ws, ws.embedder.fingerprint))
        for b in ws.state.branches():
            assert ws.store.ids(coll, branch=b.view) == {r.point_id for r in ws.state.points(b.name)}, b.name
    finally:
        ws.close()


def test_an_idle_branch_leaves_the_store_and_comes_back_without_embedding(repo: Repo, backend: str) -> None:
    from gitrag.daemon import gc

    repo.write("pkg/a.py", functions("alpha", 3))
    repo.commit("A")
    index(repo.path)
    repo.git("checkout", "-q", "-b", "idle")
    repo.write("pkg/idle.py", functions("idle", 2))
    repo.commit("idle work")
    index(repo.path)
    repo.git("checkout", "-q", "main")
    with open_workspace(repo.path) as ws:
        ws.state.db.execute("UPDATE branches SET last_used=0")
        coll = ws.state.branch("idle").collection
        before = ws.store.count(coll)
        assert gc.drop_expired(ws, checked_out={"main"}) == ["idle"]
        assert ws.store.count(coll) == before - 2  # only its own points went; main's stayed
    repo.git("checkout", "-q", "idle")
    s = index(repo.path)
    assert s.chunks_embedded == 0 and "pkg/idle.py" in paths_found(repo.path, "idle_1")


def test_a_second_clone_embeds_nothing(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/a.py", functions("alpha", 5))
    repo.write("README.md", "# Demo\n\nA demo project.\n")
    repo.commit("A")
    first = index(repo.path)
    assert first.chunks_embedded > 0
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    s = index(clone)
    assert s.chunks_embedded == 0 and s.chunks_total == first.chunks_total
    assert config.repo_data_dir(GitRepo(clone).common_dir) != config.repo_data_dir(GitRepo(repo.path).common_dir)
    assert paths_found(clone, "alpha_3") [0] == "pkg/a.py"


def test_a_moved_repository_answers_at_once(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/a.py", functions("alpha", 4))
    repo.commit("A")
    index(repo.path)
    old_dir = config.repo_data_dir(GitRepo(repo.path).common_dir)
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(str(repo.path), str(moved))
    assert paths_found(moved, "alpha_2")[0] == "pkg/a.py"  # no index run in between
    assert config.repo_data_dir(GitRepo(moved).common_dir) == old_dir
    s = index(moved)
    assert (s.chunks_embedded, s.points_upserted, s.previous_commit) == (0, 0, s.commit)


def test_a_copied_git_dir_forks_its_own_index(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/a.py", functions("alpha", 3))
    repo.commit("A")
    index(repo.path)
    copy = tmp_path / "copy"
    shutil.copytree(repo.path, copy, symlinks=True)  # like cp -a: .git/gitrag-id comes along
    Repo(copy).write("pkg/copy_only.py", functions("copyonly", 2))
    Repo(copy).commit("copy work")
    s = index(copy)
    assert s.chunks_embedded == 2  # its own index, started from the shared cache
    assert (copy / ".git" / "gitrag-id").read_text() != (repo.path / ".git" / "gitrag-id").read_text()
    assert "pkg/copy_only.py" in paths_found(copy, "copyonly_1")
    assert "pkg/copy_only.py" not in paths_found(repo.path, "copyonly_1")  # the original is untouched


def test_gc_drops_data_of_repositories_that_no_longer_exist(repo: Repo, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("A")
    index(repo.path)
    other = Repo(tmp_path / "other")
    other.write("b.py", "def b():\n    return 2\n")
    other.commit("B")
    index(other.path)
    gone = config.repo_data_dir(GitRepo(other.path).common_dir)
    shutil.rmtree(other.path)
    result = CliRunner().invoke(cli, ["gc", "--repo", str(repo.path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["repositories_dropped"] == []  # missing since now: kept through the grace
    assert (gone / identity.MISSING_FILE).exists()
    (gone / identity.MISSING_FILE).write_text(f"{time.time() - 15 * 86400:.0f}\n")  # missing for 15 days (TTL 14)
    result = CliRunner().invoke(cli, ["gc", "--repo", str(repo.path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["repositories_dropped"] == [str((other.path / ".git").resolve())]
    assert not gone.exists() and config.repo_data_dir(GitRepo(repo.path).common_dir).exists()


def test_gc_keeps_the_index_of_a_repository_moved_while_nothing_ran(repo: Repo, tmp_path: Path) -> None:
    """A new user moved a repository folder and then ran ``gitrag gc`` elsewhere: gc took the
    missing git dir for a deleted repository and dropped its index (and, with it, the cached
    vectors only it used). Now the index waits out the grace and is found again by the id."""
    from click.testing import CliRunner

    from gitrag.surfaces.cli import cli

    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("A")
    index(repo.path)
    other = Repo(tmp_path / "other")
    other.write("ledger.py", "def close_the_ledger_books(entries):\n    return sum(entries)\n")
    other.commit("ledger")
    index(other.path)
    folder = config.repo_data_dir(GitRepo(other.path).common_dir)
    moved = tmp_path / "moved-away"
    shutil.move(other.path, moved)
    result = CliRunner().invoke(cli, ["gc", "--repo", str(repo.path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["repositories_dropped"] == []
    assert folder.exists()
    s = index(moved)
    assert s.chunks_embedded == 0 and config.repo_data_dir(GitRepo(moved).common_dir) == folder
    assert not (folder / identity.MISSING_FILE).exists()  # found again: the grace is over
    assert "ledger.py" in paths_found(moved, "close the ledger books")


# -- migration from the previous release ---------------------------------------------------


def _previous_release(tmp_path: Path) -> Path:
    """The gitrag package of the last commit of this repository with index format 1."""
    revs = project_git("log", "--format=%H", "-S", "FORMAT_VERSION = 1\n", "--", "gitrag/index/state.py").split()
    for rev in ["HEAD"] + [f"{r}^" for r in revs]:  # the newest such commit
        if "FORMAT_VERSION = 1\n" in project_git("show", f"{rev}:gitrag/index/state.py"):
            break
    else:
        pytest.skip("no commit with index format 1 in this history")
    return project_package_at(rev, tmp_path / "previous-release")


def test_an_index_of_the_previous_release_is_converted_without_embedding(repo: Repo, tmp_path: Path) -> None:
    old_code = _previous_release(tmp_path)
    # the previous release parsed with tree-sitter-language-pack, which this release no longer
    # installs; without it that code chunks Python into line windows, so the chunk texts
    # (and what must be embedded) would differ for a reason that is not the conversion
    pytest.importorskip("tree_sitter_language_pack", reason="the previous release's grammars "
                        "(pip install tree-sitter-language-pack==0.13.0) are needed to build its index")
    repo.write("pkg/a.py", functions("alpha", 4))
    repo.write("pkg/b.py", functions("beta", 3))
    repo.commit("A")
    repo.git("checkout", "-q", "-b", "topic")
    repo.write("pkg/t.py", functions("topic", 2))
    repo.commit("topic")
    env = {**os.environ, "PYTHONPATH": str(old_code)}
    for branch in ("main", "topic"):  # two per-branch collections, the old way
        repo.git("checkout", "-q", branch)
        proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--json", "--repo", str(repo.path)],
                              capture_output=True, text=True, env=env, cwd=old_code, check=False)
        assert proc.returncode == 0, proc.stderr
    legacy = next(p for p in config.data_root().iterdir() if (p / "state.db").exists())
    old_collections = sorted(p.name for p in (legacy / "qdrant").iterdir())
    assert len(old_collections) == 2 and not (repo.path / ".git" / "gitrag-id").exists()
    s = index(repo.path)  # on topic: first use by this release
    assert s.chunks_embedded == 0 and s.paths_embedded == 0 and s.chunks_total > 0
    assert "pkg/t.py" in paths_found(repo.path, "topic_1")
    repo.git("checkout", "-q", "main")
    assert index(repo.path).chunks_embedded == 0
    assert "pkg/t.py" not in paths_found(repo.path, "topic_1")
    data = config.repo_data_dir(GitRepo(repo.path).common_dir)
    assert data == legacy.with_name(legacy.name.rsplit("-", 1)[0] + "-" + data.name.rsplit("-", 1)[1])
    assert not legacy.exists() and not (data / "state.db.format-1").exists()
    assert not set(old_collections) & {p.name for p in (data / "qdrant").iterdir()}  # old views dropped
    state = State(data)
    try:
        assert state.migrated_from is None and len(state.branches()) == 2
    finally:
        state.close()
