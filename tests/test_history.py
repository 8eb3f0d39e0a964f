"""The commit index, `gitrag log` and `ask --blame`, with real git repositories and real commits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gitrag.git.repo import GitRepo
from gitrag.index.history import HistoryIndex
from gitrag.surfaces.cli import cli
from tests.gitutil import Repo, index


def _log(repo: Repo, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["log", *args, "--repo", str(repo.path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _data_dir(repo: Repo) -> Path:
    from gitrag import config
    return config.repo_data_dir(GitRepo(repo.path).common_dir)


def _history(repo: Repo) -> set[str]:
    """The commit ids in the index's history of ``main``."""
    with HistoryIndex(_data_dir(repo)) as hist:
        return {c.oid for c in hist.recent("main", k=1000)}


def _git_log(repo: Repo) -> set[str]:
    return set(repo.git("log", "--format=%H").split())


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("src/app/config.py", "def load(path):\n    return open(path).read()\n")
    repo.write("README.md", "# app\n")
    repo.commit("Initial import of the configuration loader")
    repo.write("src/app/net.py", "def fetch(url):\n    return url\n")
    repo.commit("Network fetching with plain urllib")
    repo.write("src/app/ranges.py",
               "def parse_line_range(text):\n    start, _, end = text.partition(':')\n    return int(start), int(end)\n")
    repo.commit("Add parse_line_range: read a range like 30:40 given to --lines\n\nThe CLI takes --lines START:END.")
    repo.write("docs/usage.md", "# usage\n\nrun it\n")
    repo.commit("Document how to run the tool")
    return repo


def test_log_finds_the_commit_that_introduced_a_function_from_a_description(project: Repo) -> None:
    index(project.path)
    introduced = project.git("log", "--format=%H", "-1", "--", "src/app/ranges.py")
    found = _log(project, "when was parsing of a line range such as 30:40 added")
    top = found["commits"][0]
    assert top["commit"] == introduced
    assert top["subject"].startswith("Add parse_line_range")
    assert top["files"] == [{"path": "src/app/ranges.py", "status": "added", "old_path": None}]
    assert top["author"] == "Test" and top["email"] == "test@example.invalid"
    assert top["date"][:4].isdigit() and "T" in top["date"]
    assert found["up_to_date"] and found["complete"] and found["commits_indexed"] == 4
    # a path filter keeps only commits that changed a path under it
    docs = _log(project, "how to run", "--path", "docs/")
    assert [c["subject"] for c in docs["commits"]] == ["Document how to run the tool"]
    assert _log(project, "line range", "--path", "src/app/net")["commits"] == []


def test_history_follows_new_commits_renames_and_a_rewritten_branch(project: Repo) -> None:
    index(project.path)
    project.git("mv", "src/app/net.py", "src/app/network.py")
    project.commit("Rename net to network")
    renamed = project.head()
    summary = index(project.path)
    assert summary.commits_indexed == 1
    top = _log(project, "rename network")["commits"][0]
    assert top["commit"] == renamed
    assert top["files"] == [{"path": "src/app/network.py", "status": "renamed", "old_path": "src/app/net.py"}]
    # amend the last commit: the amended-away commit is no longer in the branch's history
    project.write("src/app/network.py", "def fetch(url, timeout=5):\n    return url\n")
    project.git("add", "-A")
    project.git("commit", "-q", "--amend", "-m", "Rename net to network and add a timeout")
    index(project.path)
    history = _history(project)
    assert renamed not in history and project.head() in history
    assert history == _git_log(project)


def test_an_interrupted_history_read_is_finished_by_the_next_sync(project: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.index import history as hindex

    index(project.path)
    for i in range(40):
        project.write(f"src/app/m{i}.py", f"X = {i}\n")
        project.commit(f"module {i}")
    real = hindex.HistoryIndex._insert
    calls = {"n": 0}

    def dies_once(self, infos):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the sync is killed half-way through the commits
        return real(self, infos)

    monkeypatch.setattr(hindex, "BATCH", 10)
    monkeypatch.setattr(hindex.HistoryIndex, "_insert", dies_once)
    with HistoryIndex(_data_dir(project)) as hist:
        with pytest.raises(KeyboardInterrupt):
            hist.update(GitRepo(project.path), "main", project.head())
        assert hist.head("main") != project.head()  # the branch stays at its previous head
    monkeypatch.setattr(hindex.HistoryIndex, "_insert", real)
    index(project.path)
    assert _history(project) == _git_log(project)


def test_a_long_history_is_read_within_a_budget_and_completed_by_later_syncs(repo: Repo) -> None:
    for i in range(120):
        repo.write(f"f{i % 7}.txt", f"{i}\n")
        repo.commit(f"change {i}")
    git = GitRepo(repo.path)
    with HistoryIndex(_data_dir(repo)) as hist:
        first = hist.update(git, "main", repo.head(), budget_s=0.0)
        assert not first.complete and 0 < first.commits_reachable < 120
        rounds = 1
        while not hist.update(git, "main", repo.head(), budget_s=0.0).complete:
            rounds += 1
            assert rounds < 20
        assert {c.oid for c in hist.recent("main", k=500)} == _git_log(repo)
        assert hist.branch_info("main") == (repo.head(), 120, True)


def test_log_before_any_index_says_to_index(repo: Repo) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    result = CliRunner().invoke(cli, ["log", "anything", "--repo", str(repo.path)])
    assert result.exit_code == 1
    assert "gitrag index" in result.output


def test_ask_blame_gives_the_last_commit_that_changed_each_result(repo: Repo) -> None:
    repo.write("calc.py", "def add(a, b):\n    return a + b\n")
    repo.write("scale.py", "def scale(x, factor):\n    return x * factor\n")
    repo.commit("Add add and scale")
    repo.write("scale.py", "def scale(x, factor):\n    return x * factor * 1.0\n")
    repo.commit("Make scale return floats")
    changed = repo.head()
    repo.write("other.py", "Y = 2\n")
    repo.commit("Unrelated")
    index(repo.path)
    result = CliRunner().invoke(cli, ["ask", "scale x by a factor", "--repo", str(repo.path), "--blame", "--json",
                                      "--no-answer", "-k", "5"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    results = json.loads(result.stdout)["results"]
    by_symbol = {r["symbol"]: r for r in results}
    blame = by_symbol["scale"]["blame"]
    assert blame["commit"] == changed and blame["subject"] == "Make scale return floats"
    assert blame["author"] == "Test" and blame["date"][:4].isdigit()
    assert by_symbol["add"]["blame"]["subject"] == "Add add and scale"
    plain = CliRunner().invoke(cli, ["ask", "scale", "--repo", str(repo.path), "--blame", "--no-answer"],
                               catch_exceptions=False)
    assert "last changed" in plain.stdout and "Make scale return floats" in plain.stdout


def test_blame_of_several_ranges_of_a_file_runs_git_once_and_agrees_with_libgit2(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """gitrag.git.blame: the ranges of one file go to one `git blame -L .. -L ..`; each range
    gets the newest commit that last changed one of its lines (as libgit2's per-range blame
    says), a path missing from the tree gets None, and without git libgit2 answers."""
    import subprocess

    from gitrag.git import blame as gitblame
    from gitrag.git import log as gitlog

    lines = [f"line_{i} = {i}\n" for i in range(1, 31)]
    repo.write("m.py", "".join(lines))
    repo.commit("Thirty lines")
    first = repo.head()
    lines[4] = "line_5 = 'five'\n"
    repo.write("m.py", "".join(lines))
    repo.commit("Line five in words")
    fifth = repo.head()
    lines[19] = "line_20 = 'twenty'\n"
    repo.write("m.py", "".join(lines))
    repo.commit("Line twenty in words")
    twentieth = repo.head()
    repo.write("n.py", "X = 1\n")
    repo.commit("Unrelated")
    head = repo.head()
    git = GitRepo(repo.path)
    wanted = [("m.py", 1, 4), ("m.py", 3, 8), ("m.py", 18, 25), ("m.py", 26, 30), ("gone.py", 1, 2)]
    runs: list[list[str]] = []
    real_run = subprocess.run

    def counting(args, *a, **kw):
        runs.append(list(args))
        return real_run(args, *a, **kw)

    monkeypatch.setattr(gitblame.subprocess, "run", counting)
    found = gitblame.blame_ranges(git, head, wanted)
    assert [found[k].commit if found[k] else None for k in wanted] == [first, fifth, twentieth, first, None]
    for path, start, end in wanted[:4]:
        assert found[(path, start, end)] == gitlog.blame_range(git, head, path, start, end)
    assert sum(1 for a in runs if "m.py" in a) == 1  # the four ranges of m.py: one git run
    monkeypatch.setattr(gitblame.shutil, "which", lambda name: None)
    assert gitblame.blame_ranges(git, head, wanted) == found


def test_similar_past_fixes_raise_the_files_they_changed(repo: Repo) -> None:
    """The `history` ranking stage: a past commit whose message resembles the question points
    at the file it changed (x2 for the best such file); a file only a big import touched
    gains next to nothing."""
    from gitrag.index.workspace import open_workspace
    from gitrag.query.retrieval import search

    repo.write("pkg/scheduler.py", "def plan_jobs(queue, deadline):\n    # each job, its deadline\n"
                                   "    return sorted(queue)\n")
    repo.write("pkg/limits.py", "def clamp(value, timeout):\n    return min(value, timeout)\n")
    for i, word in enumerate(["parser", "render", "colour", "prompt", "archive", "network"]):
        repo.write(f"pkg/{word}.py", f"def {word}_main(arg):\n    return arg + {i}\n")
    repo.commit("Initial import")
    repo.write("pkg/scheduler.py", "def plan_jobs(queue, deadline):\n    # each job, its deadline\n"
                                   "    return sorted(queue, key=len)\n")
    repo.commit("Fix a crash in job planning when the deadline of a job is negative")
    repo.write("pkg/parser.py", "def parser_main(arg):\n    return arg\n")
    repo.commit("Tidy")
    index(repo.path)
    ws = open_workspace(repo.path)
    try:
        question = "crash when a job has a negative deadline timeout value"
        off = {r.path: r.score for r in search(ws, question, k=5, disable=("history",), snippets=False)}
        on = {r.path: r.score for r in search(ws, question, k=5, snippets=False)}
    finally:
        ws.close()
    assert on["pkg/scheduler.py"] == pytest.approx(2 * off["pkg/scheduler.py"], rel=1e-3)
    assert off["pkg/limits.py"] <= on["pkg/limits.py"] < 1.1 * off["pkg/limits.py"]


def test_the_prior_learns_nothing_from_an_import_of_many_files(repo: Repo) -> None:
    from gitrag.query.ranking.history_prior import MAX_FIX_FILES, file_prior

    assert file_prior([(5.0, [f"f{i}.py" for i in range(MAX_FIX_FILES + 1)], MAX_FIX_FILES + 1)]) == {}
    prior = file_prior([(4.0, ["a.py"], 1), (4.0, ["a.py", "b.py", "c.py", "d.py"], 4)])
    assert prior["a.py"] == 1.0 and prior["b.py"] == pytest.approx(2.0 / 6.0)


def test_files_of_similar_fixes_join_the_candidates_on_their_own_chunks_scores() -> None:
    """A file past similar fixes changed that no list put in its top joins the candidates with
    those of its chunks a list returned deeper, scored on the candidates' own min-max scale
    (the scores already fused do not move); a chunk neither list returned does not join."""
    from gitrag.query.ranking.history_prior import add_prior_candidates, prior_files
    from gitrag.query.ranking.stages import Candidate, fuse

    cands = {"a": Candidate("a", "x.py", 1, 2, dense=0.9, sparse=10.0),
             "b": Candidate("b", "y.py", 1, 2, dense=0.5, sparse=2.0)}
    fuse(cands, 0.5)
    before = {k: c.score for k, c in cands.items()}
    prior = {"fix.py": 1.0, "x.py": 0.9, "far.py": 0.2, "half.py": 0.5}
    assert prior_files(prior, ["x.py", "y.py"]) == ["fix.py", "half.py"]  # share >= 0.5, not yet a candidate
    extra = [Candidate("c", "fix.py", 1, 2, dense=0.7, sparse=1.0),  # dense mid-scale, sparse below the floor
             Candidate("d", "fix.py", 5, 9)]  # in neither list: no evidence
    add_prior_candidates(cands, extra, 0.5)
    assert {k: cands[k].score for k in before} == before
    assert "d" not in cands
    assert cands["c"].score == pytest.approx(0.5 * 0.5 + 0.5 * 0.0)


def _unmount_history(project: Repo, tmp_path: Path) -> tuple[Path, Path]:
    """Move the indexed history.db onto a "volume" (a folder) it links to, then take the
    volume away: opening it fails with "unable to open database file", a healthy file."""
    data = _data_dir(project)
    volume, gone = tmp_path / "volume", tmp_path / "volume-unmounted"
    volume.mkdir()
    for suffix in ("", "-wal", "-shm"):
        src = data / f"history.db{suffix}"
        if src.exists():
            src.rename(volume / src.name)
    (data / "history.db").symlink_to(volume / "history.db")
    volume.rename(gone)
    return volume, gone


def test_a_history_that_cannot_be_opened_is_kept_and_named_not_discarded(project: Repo, tmp_path: Path) -> None:
    index(project.path)
    before = _history(project)
    volume, gone = _unmount_history(project, tmp_path)
    link = _data_dir(project) / "history.db"
    result = CliRunner().invoke(cli, ["log", "line range", "--repo", str(project.path)])
    assert result.exit_code == 1
    assert "cannot open" in result.output and "history.db" in result.output
    assert "unable to open database file" in result.output and "damaged" not in result.output
    # a sync goes on without its history, and replaces nothing
    index(project.path)
    assert link.is_symlink()
    gone.rename(volume)  # mounted again: the same history, whole
    assert _history(project) == before
    assert _log(project, "line range")["commits_indexed"] == 4


def test_a_history_db_that_is_not_a_database_is_discarded_and_read_again(project: Repo) -> None:
    index(project.path)
    path = _data_dir(project) / "history.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(b"this is not a database at all" * 200)
    result = CliRunner().invoke(cli, ["log", "line range", "--repo", str(project.path)])
    assert result.exit_code == 1 and "damaged" in result.output
    index(project.path)
    assert _history(project) == _git_log(project)


def test_a_commit_that_changed_no_file_prints_no_empty_files_line(repo: Repo) -> None:
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("Add a")
    repo.git("commit", "-q", "--allow-empty", "-m", "Bump nothing at all")
    index(repo.path)
    result = CliRunner().invoke(cli, ["log", "bump nothing", "--repo", str(repo.path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if "Bump nothing at all" in ln)
    assert lines[at + 1].strip() and not lines[at + 1].startswith(" " * 6 + " "), lines  # no blank files line
    assert not any(ln.strip() == "" for ln in lines), lines
