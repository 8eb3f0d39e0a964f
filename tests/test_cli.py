"""The command line as scripts see it: exit codes, one-line errors, the contract's JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitutil import Repo

INDEX_KEYS = {"repo", "branch", "commit", "files_indexed", "files_skipped", "files_deleted", "chunks_total",
              "chunks_embedded", "chunks_reused", "points_upserted", "points_deleted", "seconds"}
ASK_KEYS = {"question", "branch", "commit", "head", "up_to_date", "worktree_changes", "results", "answer"}
RESULT_KEYS = {"path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet"}


def gitrag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitrag", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("hooks/install.py", "def install_hooks(git_dir):\n    \"\"\"Write the post-commit hook into git_dir.\"\"\"\n"
               "    (git_dir / 'hooks' / 'post-commit').write_text('#!/bin/sh')\n")
    repo.write("util/strings.py", "def slugify(text):\n    return '-'.join(text.lower().split())\n")
    repo.write("assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    repo.write("data/latin1.txt", "caf\xe9 cr\xe8me\n".encode("latin-1"))
    repo.commit("project")
    return repo


def test_index_twice_then_ask_through_the_cli(project: Repo) -> None:
    first = gitrag("index", "--json", cwd=project.path)
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert INDEX_KEYS <= set(data) and data["chunks_embedded"] > 0
    assert {"path": "assets/logo.png", "reason": "binary"} in data["skipped"]
    assert data["files_indexed"] == 3  # the invalid UTF-8 text file is still indexed
    second = json.loads(gitrag("index", "--json", cwd=project.path).stdout)
    assert second["chunks_embedded"] == 0 and second["points_upserted"] == 0

    asked = gitrag("ask", "where is the post-commit hook written", "--json", "-k", "3", cwd=project.path)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert ASK_KEYS <= set(answer) and answer["up_to_date"] is True and answer["answer"] is None
    assert RESULT_KEYS <= set(answer["results"][0])
    assert answer["results"][0]["path"] == "hooks/install.py"
    assert "def install_hooks" in answer["results"][0]["snippet"]

    human = gitrag("ask", "slugify text", "-k", "1", cwd=project.path)
    assert "util/strings.py:1-2" in human.stdout and "main: up to date" in human.stdout


def test_status_json_contract(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    data = json.loads(gitrag("status", "--json", cwd=project.path).stdout)
    assert {"daemon", "repos", "embedder", "store"} <= set(data)
    assert {"running", "pid", "socket"} <= set(data["daemon"])
    branch = data["repos"][0]["branches"][0]
    assert {"name", "head", "indexed_commit", "up_to_date"} <= set(branch)
    assert branch["up_to_date"] is True and branch["head"] == project.head()


def test_status_prints_paths_as_they_are_and_aligns_wide_branch_names(tmp_path: Path) -> None:
    from rich.cells import cell_len

    repo = Repo(tmp_path / "[red]project")  # rich markup in a folder name
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    gitrag("index", cwd=repo.path)
    repo.git("checkout", "-q", "-b", "feature/ブランチ")  # two terminal columns a character
    gitrag("index", cwd=repo.path)
    out = gitrag("status", cwd=repo.path).stdout
    assert f"{repo.path}  (0 work-tree change(s) not indexed)" in out
    rows = [line for line in out.splitlines() if "up to date" in line]
    assert len(rows) == 2 and any("ブランチ" in row for row in rows)
    assert len({cell_len(row[: row.index("up to date")]) for row in rows}) == 1, rows


def test_outside_a_repository_is_a_one_line_error(tmp_path: Path) -> None:
    for args in (["index"], ["ask", "anything"], ["status"]):
        r = gitrag(*args, "--repo", str(tmp_path))
        assert r.returncode == 1, args
        assert r.stderr.strip().count("\n") == 0 and "not inside a git repository" in r.stderr
        assert "Traceback" not in r.stderr


def test_empty_repository_says_nothing_to_index_and_writes_nothing(repo: Repo) -> None:
    home = Path(os.environ["GITRAG_HOME"])
    git_dir = sorted(p.name for p in (repo.path / ".git").iterdir())
    for args in (["index"], ["index", "--json"]):
        r = gitrag(*args, "--repo", str(repo.path))
        assert (r.returncode, r.stdout, r.stderr) == (1, "", "gitrag: error: nothing to index: the repository has no "
                                                      "commits yet; commit something, then `gitrag index`\n")
    assert not home.exists()  # no data folder, no vector cache, no lock
    assert sorted(p.name for p in (repo.path / ".git").iterdir()) == git_dir  # no id file in the git dir
    repo.write("a.py", "x = 1\n")
    repo.commit("first")
    repo.git("checkout", "-q", "--orphan", "fresh")  # commits elsewhere: the unborn branch is named
    r = gitrag("index", "--repo", str(repo.path))
    assert r.returncode == 1 and "nothing to index: branch 'fresh' has no commits yet" in r.stderr
    assert not home.exists()


def test_ask_before_index_says_to_index(project: Repo) -> None:
    r = gitrag("ask", "slugify", cwd=project.path)
    assert r.returncode == 1 and "gitrag index" in r.stderr


def test_bad_usage_exits_2(project: Repo) -> None:
    assert gitrag("ask", cwd=project.path).returncode == 2
    assert gitrag("ask", "x", "--mode", "telepathy", cwd=project.path).returncode == 2


def test_unknown_embedder_is_a_clear_error(project: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_EMBEDDER", "nonsense")
    r = gitrag("index", cwd=project.path)
    assert r.returncode == 1 and "unknown embedder 'nonsense'" in r.stderr


def test_help_teaches(project: Repo) -> None:
    out = gitrag("--help").stdout
    for command in ("index", "ask", "status", "install", "eval", "gc", "mcp", "doctor"):
        assert command in out
    assert "Examples" in gitrag("ask", "--help").stdout
    assert "stops the daemon" in " ".join(gitrag("uninstall", "--help").stdout.split())
    for flag in ("--help", "-h"):  # click's help, like every other command's (not the hook path's argparse)
        notify = gitrag("notify", flag)
        assert notify.returncode == 0 and notify.stdout.startswith("Usage: gitrag notify [OPTIONS] HOOK [ARGS]...")
        assert "-h, --help  Show this message and exit." in notify.stdout


def test_every_option_says_what_it_does() -> None:
    import click

    from gitrag.surfaces.cli import cli

    silent = [(name, p.opts[0]) for name, cmd in cli.commands.items() for p in cmd.params
              if isinstance(p, click.Option) and not p.help]
    assert not silent, f"options without help text: {silent}"


def _modules_loaded_by(*args: str, cwd: Path, out: Path) -> set[str]:
    """The modules a ``gitrag ARGS`` process had imported when it exited (the real entry point)."""
    code = ("import json, sys\n"
            f"sys.argv = ['gitrag', *{list(args)!r}]\n"
            "from gitrag.surfaces.entry import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n")
    subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize("args", [("--help",), ("notify", "post-commit"), ("status", "--help")])
def test_cold_commands_do_not_import_ranking_or_numpy(project: Repo, tmp_path: Path, args: tuple[str, ...]) -> None:
    loaded = _modules_loaded_by(*args, cwd=project.path, out=tmp_path / "modules.json")
    assert "gitrag.surfaces.entry" in loaded
    assert ("click" in loaded) == (args[0] != "notify")  # the hook's notify starts without click
    heavy = sorted(m for m in loaded if m.split(".")[0] == "numpy" or m.startswith("gitrag.query.ranking"))
    assert not heavy, f"gitrag {' '.join(args)} imported {heavy}"


def test_ablate_still_lists_and_checks_the_ranking_stages(project: Repo, tmp_path: Path) -> None:
    from gitrag.query.ranking.pipeline import STAGES

    assert all(stage in gitrag("eval", "--help").stdout for stage in STAGES)
    questions = tmp_path / "q.jsonl"
    questions.write_text("{}\n")
    bad = gitrag("eval", str(questions), "--ablate", "telepathy", cwd=project.path)
    assert bad.returncode == 2 and "'telepathy' is not one of 'query-weights'" in bad.stderr


def test_ask_with_another_embedder_says_how_to_fix(project: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    gitrag("index", cwd=project.path)
    monkeypatch.setenv("GITRAG_EMBEDDER", "static")
    r = gitrag("ask", "slugify", cwd=project.path)
    assert r.returncode == 1 and "gitrag index --rebuild" in r.stderr


def test_empty_question_and_empty_repository(repo: Repo) -> None:
    assert gitrag("ask", "  ", "--repo", str(repo.path)).returncode == 2
    r = gitrag("ask", "anything", "--repo", str(repo.path))
    assert r.returncode == 1 and "has no commit yet" in r.stderr


def test_undecodable_config_is_a_one_line_warning(project: Repo) -> None:
    """A repository's .gitrag.toml that is not UTF-8 is ignored (tests/test_config_broken.py)."""
    (project.path / ".gitrag.toml").write_bytes(b"this is = = not toml [[[\n\x00\xff")
    r = gitrag("status", cwd=project.path)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"gitrag: warning: cannot read {project.path / '.gitrag.toml'} line 2: "
                                             "not UTF-8 text (invalid start byte); the file is ignored (defaults used) "
                                             "until it is fixed"]


def test_a_bad_number_says_where_it_was_set(project: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    (project.path / ".gitrag.toml").write_text('batch_size = "lots"\n')
    r = gitrag("status", cwd=project.path)
    assert r.returncode == 0
    assert r.stderr.strip() == (f"gitrag: warning: setting 'batch_size' in {project.path / '.gitrag.toml'} line 1 must "
                                "be a whole number of texts greater than 0, got 'lots'; the file is ignored (defaults "
                                "used) until it is fixed")
    (project.path / ".gitrag.toml").unlink()
    monkeypatch.setenv("GITRAG_MAX_FILE_BYTES", "-5")
    r = gitrag("status", cwd=project.path)
    assert r.returncode == 1 and r.stderr.strip() == ("gitrag: error: GITRAG_MAX_FILE_BYTES must be a whole number of bytes "
                                                 "greater than 0, got '-5'")


def test_every_command_judges_a_bad_number_setting_the_same_way(project: Repo, daemon: object) -> None:
    """Also while a daemon runs (status and gc ask it, and never loaded this process's settings)."""
    for var, value, message in (
        ("GITRAG_BATCH_SIZE", "abc", "GITRAG_BATCH_SIZE must be a whole number of texts greater than 0, got 'abc'"),
        ("GITRAG_INDEX_WORKERS", "abc",
         "GITRAG_INDEX_WORKERS must be a whole number of worker processes, 0 or more (0 or 1: none), got 'abc'"),
        ("GITRAG_BRANCH_TTL_DAYS", "1e999",
         "GITRAG_BRANCH_TTL_DAYS must be a number of days greater than 0 and at most 36500, got '1e999'"),
        ("GITRAG_PROGRESS_INTERVAL", "banana", "GITRAG_PROGRESS_INTERVAL must be a number of seconds or off, got 'banana'"),
    ):
        env = {**os.environ, var: value}
        for command in (["status"], ["status", "--json"], ["gc"], ["ask", "slugify"], ["index"]):
            done = subprocess.run([sys.executable, "-m", "gitrag", *command], cwd=project.path, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert (done.returncode, done.stdout, done.stderr.strip()) == (1, "", f"gitrag: error: {message}"), command


def test_an_unknown_language_is_a_usage_error(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    bad = gitrag("ask", "slugify text", "--lang", "klingon", cwd=project.path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "unknown language 'klingon'; known: c, cpp, csharp, go, ini, java, javascript," in bad.stderr
    assert "python, rst, ruby, rust, text, tsx, typescript" in bad.stderr
    assert "util/strings.py" in gitrag("ask", "slugify text", "--lang", "Python", cwd=project.path).stdout


def test_the_lang_help_lists_every_language_the_chunker_knows() -> None:
    """cli.py spells the list out (importing the chunker would slow every command's start)."""
    from gitrag.index.chunking.languages import LANGUAGES

    help_text = subprocess.run([sys.executable, "-m", "gitrag", "ask", "--help"], capture_output=True, text=True,
                               check=True).stdout
    text = " ".join(help_text.split())
    listed = text.split("Only results in this language:", 1)[1].split(".", 1)[0]
    assert sorted(w.strip(" ,") for w in listed.replace(" or ", ", ").split(",") if w.strip(" ,")) == list(LANGUAGES)


def test_no_results_under_a_filter_names_the_filter(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    for extra in ((), ("--files",)):
        out = " ".join(gitrag("ask", "slugify text", "--lang", "ruby", "--path", "util/", *extra, cwd=project.path).stdout.split())
        assert out.startswith("no results with --path util/ --lang ruby: "), out
        assert "--lang a language name as in the results (python," in out
    assert "util/strings.py" in gitrag("ask", "slugify text", "--lang", "python", cwd=project.path).stdout


def test_a_path_or_exclude_that_names_no_indexed_file_says_so_on_stderr(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    typo = gitrag("ask", "slugify text", "--path", "/nonexistent", cwd=project.path)
    assert typo.returncode == 0 and typo.stdout.startswith("no results with --path /nonexistent")  # as no results
    assert typo.stderr.strip() == ("--path /nonexistent matches no indexed file (`git ls-files` lists the "
                                   "repository's files)")
    near = gitrag("ask", "slugify text", "--path", "utl/", cwd=project.path)
    assert near.returncode == 0 and near.stderr.strip() == "--path utl/ matches no indexed file; nearest: util/"
    as_json = gitrag("ask", "slugify text", "--path", "/nonexistent", "--json", "--no-answer", cwd=project.path)
    assert json.loads(as_json.stdout)["results"] == [] and "matches no indexed file" in as_json.stderr
    # a glob that leaves nothing out is named; one that matches a file, and a --path that matches, are not
    excluded = gitrag("ask", "slugify text", "--exclude", "*.rs", "--exclude", "util/", cwd=project.path)
    assert excluded.returncode == 0 and excluded.stderr.strip() == "--exclude *.rs matches no indexed file"
    fine = gitrag("ask", "slugify text", "--path", "util", cwd=project.path)
    assert "util/strings.py" in fine.stdout and "matches no indexed file" not in fine.stderr
    nothing_relevant = gitrag("ask", "slugify text", "--path", "util/", "--lang", "ruby", cwd=project.path)
    assert "matches no indexed file" not in nothing_relevant.stderr  # the path matched: --lang left it out


def test_a_file_name_with_a_newline_stays_on_one_citation_line(repo: Repo) -> None:
    repo.write("we\nird.py", "def newline_named():\n    return 'odd'\n")
    repo.commit("odd name")
    gitrag("index", cwd=repo.path)
    out = gitrag("ask", "newline_named", "-k", "1", cwd=repo.path).stdout
    # quoted as git quotes it (`git ls-files`): C escapes inside double quotes
    assert '"we\\nird.py":1-2' in out.splitlines()[0]


def test_ask_exclude_and_files(project: Repo) -> None:
    project.write("docs/hooks.md", "# Hooks\n\nThe post-commit hook is written by install_hooks.\n")
    project.commit("docs")
    gitrag("index", cwd=project.path)
    plain = json.loads(gitrag("ask", "post-commit hook", "--json", "--mode", "sparse", cwd=project.path).stdout)
    assert "docs/hooks.md" in {r["path"] for r in plain["results"]} and "files" not in plain
    asked = gitrag("ask", "post-commit hook", "--json", "--mode", "sparse", "--exclude", "docs/**",
                   "--exclude", "*.txt", "--files", "-k", "2", cwd=project.path)
    assert asked.returncode == 0, asked.stderr
    data = json.loads(asked.stdout)
    paths = {r["path"] for r in data["results"]} | {f["path"] for f in data["files"]}
    assert "docs/hooks.md" not in paths and not any(p.endswith(".txt") for p in paths)
    assert data["files"][0]["path"] == "hooks/install.py" and len(data["files"]) <= 2
    assert set(data["files"][0]) == {"path", "language", "score", "matches", "chunks"}
    human = gitrag("ask", "post-commit hook", "--files", "--no-answer", "--exclude", "docs/", cwd=project.path)
    assert " 1. hooks/install.py" in human.stdout and "1-3  install_hooks" in human.stdout
    bad = gitrag("ask", "hook", "--exclude", "", cwd=project.path)
    assert bad.returncode == 2 and "--exclude" in bad.stderr



def test_eval_exclude_applies_to_every_mode(project: Repo, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "kind": "concept", "query": "post-commit hook install",
                                     "targets": [{"path": "hooks/install.py", "symbol": "install_hooks",
                                                  "start_line": 1, "end_line": 3}]}) + "\n")
    runs = {}
    for extra in ((), ("--exclude", "hooks/")):
        proc = gitrag("eval", str(questions), "--mode", "sparse", "--mode", "grep", "--json", *extra, cwd=project.path)
        assert proc.returncode == 0, proc.stderr
        runs[extra] = {m: v["overall"]["recall@10"] for m, v in json.loads(proc.stdout)["modes"].items()}
    assert runs[()] == {"sparse": 1.0, "grep": 1.0}
    assert runs[("--exclude", "hooks/")] == {"sparse": 0.0, "grep": 0.0}


def test_eval_while_the_daemon_used_the_repository_runs(project: Repo, tmp_path: Path, daemon: object) -> None:
    """Case 9 of issue 22: eval used to refuse while the daemon held the store; the daemon
    now closes it for the run (op ``release``) and opens it again on the next request."""
    from gitrag.daemon import client

    gitrag("index", cwd=project.path)  # through the daemon, which now holds the store
    client.request("ask", timeout=120, repo=str(project.path), question="slugify")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "kind": "concept", "query": "slugify text",
                                     "targets": [{"path": "util/strings.py", "start_line": 1, "end_line": 2}]}) + "\n")
    proc = gitrag("eval", str(questions), "--mode", "sparse", "--json", cwd=project.path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["modes"]["sparse"]["overall"]["recall@10"] == 1.0
    again = client.request("ask", timeout=120, repo=str(project.path), question="slugify", no_answer=True)
    assert again["results"]  # the daemon opened it again


def _gitrag_bytes(*args: bytes, cwd: Path | bytes) -> subprocess.CompletedProcess[bytes]:
    """The CLI with raw argv bytes, as a shell passes them (not necessarily UTF-8)."""
    return subprocess.run([sys.executable.encode(), b"-m", b"gitrag", *args], cwd=cwd, capture_output=True, timeout=300)


def test_a_question_and_a_path_that_are_not_utf8_are_answered(repo: Repo) -> None:
    repo.write("caf\udce9.py", "def cafe_function():\n    return 'cafe'\n")  # the file name's bytes: caf\xe9.py
    repo.commit("a latin-1 file name")
    assert gitrag("index", cwd=repo.path).returncode == 0
    asked = _gitrag_bytes(b"ask", b"caf\xe9 \xff cafe_function", b"--json", b"-k", b"1", cwd=repo.path)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["results"][0]["path"] == "caf\\xe9.py"
    scoped = _gitrag_bytes(b"ask", b"cafe_function", b"--path", b"caf\xe9", b"--json", cwd=repo.path)
    assert scoped.returncode == 0, scoped.stderr
    assert [r["path"] for r in json.loads(scoped.stdout)["results"]] == ["caf\\xe9.py"]


def test_a_repository_folder_that_is_not_utf8_is_one_clear_line(tmp_path: Path) -> None:
    folder = os.fsdecode(bytes(tmp_path) + b"/r\xffp")
    bad = Repo(Path(folder))
    bad.write("a.py", "def a():\n    return 1\n")
    bad.commit("one")
    for command in ([b"index"], [b"ask", b"a"], [b"status"]):
        done = _gitrag_bytes(*command, cwd=os.fsencode(folder))
        err = done.stderr.decode("utf-8", "replace").strip()
        assert done.returncode == 1, err
        assert len(err.splitlines()) == 1 and "r\\xffp is not valid UTF-8" in err and "rename the folder" in err


def test_output_an_encoding_cannot_hold_still_prints(repo: Repo) -> None:
    repo.write("dessert.py", 'def creme():\n    """crème brûlée index"""\n    return "é"\n')
    repo.commit("a dessert")
    assert gitrag("index", cwd=repo.path).returncode == 0
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    run = [sys.executable, "-m", "gitrag", "ask", "crème brûlée index", "-k", "1"]
    human = subprocess.run(run, cwd=repo.path, env=env, capture_output=True, timeout=300)
    assert human.returncode == 0, human.stderr
    assert b'"""cr\\xe8me br\\xfbl\\xe9e index"""' in human.stdout  # escaped, not lost
    machine = subprocess.run([*run, "--json"], cwd=repo.path, env=env, capture_output=True, timeout=300)
    assert machine.returncode == 0, machine.stderr
    machine.stdout.decode("ascii")  # every byte fits the encoding asked for
    data = json.loads(machine.stdout)
    assert data["question"] == "crème brûlée index" and "crème brûlée" in data["results"][0]["snippet"]


@pytest.mark.parametrize("with_daemon", [False, True])
def test_ask_dash_reads_a_question_longer_than_a_command_line_from_stdin(
        project: Repo, request: pytest.FixtureRequest, with_daemon: bool) -> None:
    assert gitrag("index", cwd=project.path).returncode == 0
    if with_daemon:
        request.getfixturevalue("daemon")
    question = "how does slugify turn text into a slug? " + "context line of a long agent prompt\n" * 5000
    assert len(question.encode()) > 128 * 1024  # more than one argv string may hold (MAX_ARG_STRLEN)
    run = [sys.executable, "-m", "gitrag", "ask", "-", "-k", "1", "--json"]
    done = subprocess.run(run, cwd=project.path, input=question.encode(), capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["question"] == question and data["results"][0]["path"] == "util/strings.py"
    empty = subprocess.run(run, cwd=project.path, input=b" \n", capture_output=True, timeout=300)
    assert empty.returncode == 2 and b"the question is empty" in empty.stderr
    huge = subprocess.run(run, cwd=project.path, input=b"x" * 500_001, capture_output=True, timeout=300)
    assert (huge.returncode, huge.stdout) == (2, b"")
    assert huge.stderr.decode().splitlines() == [  # the limit, and how to pass the start of a file
        "gitrag: error: the question is 500,001 characters long; at most 500,000: shorten it, or pass a file's first "
        "500,000 bytes (`head -c 500000 FILE | gitrag ask -`)"]
    assert "reads the question from stdin" in " ".join(gitrag("ask", "--help").stdout.split())


def test_ask_help_states_the_question_limit() -> None:
    from gitrag.daemon.protocol import MAX_QUESTION

    text = " ".join(gitrag("ask", "--help").stdout.split())
    assert f"A question holds at most {MAX_QUESTION:,} characters, and no NUL." in text
    assert "(`gitrag ask - < FILE`)" in text


@pytest.mark.parametrize("with_daemon", [False, True])
def test_a_question_holding_a_nul_is_refused_the_same_way_on_both_routes(
        project: Repo, request: pytest.FixtureRequest, with_daemon: bool) -> None:
    """The daemon's protocol refuses a NUL in a question; an in-process answer (no daemon) used to
    answer it. Both routes now give the same one line and exit 2; so does ``log``."""
    assert gitrag("index", cwd=project.path).returncode == 0
    if with_daemon:
        request.getfixturevalue("daemon")
    said = ("gitrag: error: the question holds a NUL character (character 5); a question is text: remove it "
            "(`tr -d '\\000'` drops them from a piped file)")
    for command in (["ask", "-", "-k", "1"], ["ask", "-", "--json"], ["log", "-"]):
        done = subprocess.run([sys.executable, "-m", "gitrag", *command], cwd=project.path, input=b"slug\0ify text",
                              capture_output=True, timeout=300)
        assert (done.returncode, done.stdout, done.stderr.decode().splitlines()) == (2, b"", [said]), command
    fine = subprocess.run([sys.executable, "-m", "gitrag", "ask", "-", "-k", "1"], cwd=project.path,
                          input=b"slugify text", capture_output=True, timeout=300)
    assert fine.returncode == 0 and "util/strings.py" in fine.stdout.decode()


def test_ask_expand_adds_at_most_k_results_in_json_and_print(repo: Repo) -> None:
    """``ask -k 2 --expand 1`` on a function calling 12 helpers listed all 12 after the 2
    results; at most 2 now, the same ones in --json and on the terminal."""
    for i in range(12):
        repo.write(f"pkg/helper{i}.py", f"def helper_{i}(x):\n    return x + {i}\n")
    calls = "".join(f"    x = helper_{i}(x)\n" for i in range(12))
    repo.write("pkg/main.py", "".join(f"from pkg.helper{i} import helper_{i}\n" for i in range(12))
               + f"\n\ndef orchestrate(x):\n{calls}    return x\n")
    repo.commit("a fan-out")
    assert gitrag("index", cwd=repo.path).returncode == 0
    ask = ["ask", "orchestrate", "-k", "2", "--expand", "1", "--no-answer", "--mode", "sparse"]
    data = json.loads(gitrag(*ask, "--json", cwd=repo.path).stdout)
    added = [r for r in data["results"] if r["expanded_from"]]
    assert data["results"][0]["symbol"] == "orchestrate" and len(added) == 2 and len(data["results"]) <= 4
    human = [line for line in gitrag(*ask, cwd=repo.path).stdout.splitlines() if "(used by " in line]
    assert [line.split()[1] for line in human] == [f"{r['path']}:{r['start_line']}-{r['end_line']}" for r in added]


def test_status_counts_skipped_files_per_kind_of_reason(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("web/one.js", b"x" * 200_000 + b"\n")  # one line of 200,000 bytes and its newline
    repo.write("web/two.js", b"var a=" + b"f(1)," * 30_000 + b"0;")
    repo.write("assets/a.png", b"\x89PNG\r\n\x1a\n\x00" + bytes(range(256)))
    repo.write("assets/b.bin", b"\x00\x01\x02" * 10)
    repo.write("data/big.txt", "a line of text\n" * 20_000)  # 300,000 bytes
    repo.write("src/ok.py", "def ok():\n    return 1\n")
    repo.commit("files of every kind")
    monkeypatch.setenv("GITRAG_MAX_FILE_BYTES", "250000")
    done = gitrag("index", "--json", cwd=repo.path)
    assert done.returncode == 0, done.stderr
    reported = {s["path"]: s["reason"] for s in json.loads(done.stdout)["skipped"]}  # per file: with its detail
    assert reported == {"web/one.js": "minified (average line 200000 bytes)",
                        "web/two.js": "minified (average line 150008 bytes)",
                        "assets/a.png": "binary", "assets/b.bin": "binary", "data/big.txt": "larger than 250000 bytes"}
    status = json.loads(gitrag("status", "--json", cwd=repo.path).stdout)
    skipped = status["repos"][0]["branches"][0]["skipped"]
    assert skipped == {"binary": 2, "minified": 2, "larger than max_file_bytes": 1}
    assert list(skipped) == ["binary", "minified", "larger than max_file_bytes"]  # most first, then by name
    human = gitrag("status", cwd=repo.path).stdout
    assert "skipped files: 2 binary, 2 minified, 1 larger than max_file_bytes" in human


def test_ask_path_takes_what_a_shell_gives(project: Repo) -> None:
    """A new user typed ``--path ./util`` (tab completion), ``util`` from inside ``hooks/``'s
    sibling, an absolute path, and ``../util`` from a subfolder: each used to match nothing.
    Each now means the repository folder ``util/``; ``util`` no longer also means ``utils/``."""
    project.write("utilities/other.py", "def slugify_other(text):\n    return text\n")
    project.commit("a folder whose name starts like util")
    gitrag("index", cwd=project.path)

    def paths(path: str, cwd: Path) -> set[str]:
        got = gitrag("ask", "slugify text", "--path", path, "--json", "--no-answer", cwd=cwd)
        assert got.returncode == 0, got.stderr
        return {r["path"] for r in json.loads(got.stdout)["results"]}

    want = {"util/strings.py"}
    assert paths("util/", project.path) == want
    for typed, cwd in (("./util", project.path), ("util", project.path), (str(project.path / "util"), project.path),
                       ("../util", project.path / "hooks"), ("strings.py", project.path / "util"),
                       ("./", project.path / "util")):
        assert paths(typed, cwd) == want, (typed, cwd)
    assert paths("util/str", project.path) == want  # a prefix of names is still a prefix
    assert "utilities/other.py" in paths(".", project.path / "hooks" / "..")


def test_read_only_commands_in_a_repository_never_indexed_write_nothing(project: Repo) -> None:
    """``status``, ``ask`` and ``related`` used to create ``.git/gitrag-id`` and a data folder
    with a state database in a repository gitrag never indexed."""
    home = Path(os.environ["GITRAG_HOME"])
    said = "not indexed: run `gitrag install` (hooks keep it current) or `gitrag index`"
    for args in (("ask", "slugify"), ("related", "util/strings.py:1")):
        r = gitrag(*args, cwd=project.path)
        assert (r.returncode, r.stdout, r.stderr.strip()) == (1, "", f"gitrag: error: {said}"), args
    human = gitrag("status", cwd=project.path)
    assert human.returncode == 0 and said in human.stdout and "state:" not in human.stdout, human.stdout
    data = json.loads(gitrag("status", "--json", cwd=project.path).stdout)
    assert data["repos"][0]["data_dir"] is None and data["repos"][0]["branches"] == []
    assert not (project.path / ".git" / "gitrag-id").exists()
    assert not (home / "data").exists() or not any((home / "data").glob("*/state.db"))
    assert gitrag("index", cwd=project.path).returncode == 0  # then everything is as before
    assert (project.path / ".git" / "gitrag-id").exists() and gitrag("ask", "slugify", cwd=project.path).returncode == 0
    assert json.loads(gitrag("status", "--json", cwd=project.path).stdout)["repos"][0]["data_dir"]


def test_every_doctor_check_is_documented_where_the_others_are(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    names = [c["name"].split()[0] for c in json.loads(gitrag("doctor", "--json", cwd=project.path).stdout)["checks"]]
    assert "events" in names
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    listed = readme.split("gitrag doctor       # one line per check (", 1)[1].split(")", 1)[0].split(", ")
    table = readme.split("### `gitrag doctor --json`", 1)[1].split("| `checks[].name`", 1)[0]
    assert listed == list(dict.fromkeys(names)), listed
    assert all(f"`{n}`" in table or f"`{n} <branch>`" in table for n in names), names


def test_ask_after_an_interrupted_first_index_says_the_index_is_partial(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C in a first `gitrag index` leaves the batches it wrote and no indexed commit: `ask`
    (every mode) and `related` answer from them and say so, never "the index at None"."""
    from gitrag.index import indexer
    from tests.gitutil import index

    for i in range(6):
        repo.write(f"pkg/mod{i}.py", f"def handler_{i}(request):\n    return request.get('value_{i}')\n")
    repo.commit("six modules")
    real, calls = indexer.Indexer._write_batch, []

    def interrupted(self, *args, **kw):  # the second batch never comes: Ctrl-C after the first
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kw)

    monkeypatch.setattr(indexer, "BATCH_FILES", 2)
    monkeypatch.setattr(indexer.Indexer, "_write_batch", interrupted)
    with pytest.raises(KeyboardInterrupt):
        index(repo.path)
    head = repo.head()
    line = (f"main: answered from a partial index (its first index has not finished, HEAD {head[:12]}): run "
            f"`gitrag index` to finish it (it goes on from where it stopped)")
    for mode in ("hybrid", "dense", "sparse"):
        r = gitrag("ask", "handler request value", "--mode", mode, "--no-answer", cwd=repo.path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == line and "None" not in r.stdout, r.stdout
        assert "pkg/mod" in r.stdout  # the first batch's files answer
    data = json.loads(gitrag("ask", "handler request value", "--json", cwd=repo.path).stdout)
    assert (data["commit"], data["head"], data["up_to_date"]) == (None, head, False) and data["results"]
    related = gitrag("related", f"{data['results'][0]['path']}:1", cwd=repo.path)
    assert related.returncode == 0 and related.stdout.splitlines()[-1] == line, related.stdout + related.stderr
    row = next(ln for ln in gitrag("status", cwd=repo.path).stdout.splitlines() if ln.startswith(" * main"))
    assert f"a partial index (its first index has not finished), head {head[:12]}" in row, row
    assert "nothing" not in row and " 0 points" not in row  # the batches written: their points are counted
    assert gitrag("index", cwd=repo.path).returncode == 0
    assert gitrag("ask", "handler", cwd=repo.path).stdout.splitlines()[-1] == "main: up to date"


def test_status_names_a_deleted_branch_and_a_detached_head_view_as_what_they_are(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    project.git("checkout", "-q", "-b", "feature")
    project.write("util/more.py", "def more():\n    return 2\n")
    feature = project.commit("more")
    gitrag("index", cwd=project.path)
    project.git("checkout", "-q", "--detach", "main")
    gitrag("index", cwd=project.path)  # the view of a detached HEAD
    project.git("checkout", "-q", "main")
    project.git("branch", "-q", "-D", "feature")
    out = gitrag("status", cwd=project.path).stdout
    rows = {line.split()[0]: line for line in out.splitlines()[3:]}
    assert f"indexed {feature[:12]}; branch deleted in git: `gitrag gc` forgets it" in rows["feature"]
    assert "a detached HEAD's view, not checked out now" in rows["(HEAD"]
    assert "not checked out" not in rows["feature"] and "head" not in rows["(HEAD"]
    assert len({row.index(" points") for row in rows.values() if " points" in row}) == 1  # still a column
    kinds = {b["name"]: b["kind"] for b in json.loads(gitrag("status", "--json", cwd=project.path).stdout)
             ["repos"][0]["branches"]}
    assert kinds == {"main": "branch", "feature": "deleted", "(HEAD detached)": "detached"}
    assert gitrag("ask", "more", "--rev", "HEAD", "--no-answer", cwd=project.path).returncode == 0  # a revision view
    lags = {c["name"]: c["detail"] for c in json.loads(gitrag("doctor", "--json", cwd=project.path).stdout)
            ["checks"] if c["name"].startswith("lag ")}
    assert lags["lag (HEAD detached)"] == "a detached HEAD's view, not checked out now", lags
    assert lags["lag feature"].startswith("branch deleted in git"), lags
    views = [detail for name, detail in lags.items() if name.startswith("lag (rev ")]
    assert views == ["an `ask --rev` view: at its commit by definition"], lags
    assert not any("gone" in detail for detail in lags.values()), lags
    assert json.loads(gitrag("gc", "--json", cwd=project.path).stdout)["deleted"] == ["feature"]
    assert "feature" not in gitrag("status", cwd=project.path).stdout


def test_results_of_commits_not_indexed_yet_are_not_called_work_tree(project: Repo) -> None:
    gitrag("index", cwd=project.path)
    project.write("net/retry.py", "def retry_handler(request):\n    return request.retry()\n")
    project.commit("retry")  # committed, not indexed: the overlay reads it from disk
    project.write("net/backoff.py", "def backoff_handler(request):\n    return request.backoff()\n")  # untracked
    out = gitrag("ask", "retry backoff handler request", "-k", "2", "--no-answer", cwd=project.path).stdout
    rows = {line.split()[1].split(":")[0]: line for line in out.splitlines() if line[:3].strip().rstrip(".").isdigit()}
    assert rows["net/retry.py"].endswith("[in HEAD, not indexed yet]"), out
    assert rows["net/backoff.py"].endswith("[work tree]"), out
    like = gitrag("related", "net/retry.py:1", cwd=project.path).stdout.splitlines()
    assert like[0].endswith("retry_handler  [in HEAD, not indexed yet]") and "[work tree]" in "\n".join(like), like
    project.write("net/retry.py", "def retry_handler(request):\n    return request.retry(3)\n")  # edited since
    out = gitrag("ask", "retry handler request", "-k", "1", "--no-answer", cwd=project.path).stdout
    assert out.splitlines()[0].endswith("[work tree]"), out
