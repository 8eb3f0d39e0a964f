"""``gitrag related PATH:LINE``: code most like the chunk at a location (gitrag.query.related),
on a real git repository indexed in-process with the hash embedder and the real chunker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gitutil import Repo, index

ORIGINAL = '''def merge_sorted_runs(left, right):
    """Merge two sorted lists into one sorted list."""
    out, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out
'''


@pytest.fixture
def copies(repo: Repo) -> Repo:
    repo.write("algo/merge.py", "import os\n\n\n" + ORIGINAL + "\n\ndef unrelated_helper(path):\n"
               "    return os.path.basename(path)\n")
    repo.write("vendor_like/combine.py", ORIGINAL.replace("merge_sorted_runs", "combine_ordered"))  # a renamed copy
    repo.write("net/http.py", "def fetch_url(url, timeout):\n    \"\"\"Download a page.\"\"\"\n"
               "    return request('GET', url, timeout=timeout)\n")
    repo.write("net/retry.py", "def backoff(attempt):\n    return min(2 ** attempt, 60)\n")
    repo.write("docs/sorting.md", "# Sorting\n\nWe merge sorted runs of lists.\n")
    repo.commit("code")
    index(repo.path)
    return repo


def _related(repo: Repo, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "gitrag", "related", *args, "--repo", str(repo.path), "--json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_related_finds_a_copy_under_another_name_first_and_leaves_itself_out(copies: Repo) -> None:
    got = _related(copies, "algo/merge.py:8")
    assert got["located"]["symbol"] == "merge_sorted_runs" and got["question"] == "algo/merge.py:8"
    top = got["results"][0]
    assert (top["path"], top["symbol"]) == ("vendor_like/combine.py", "combine_ordered")
    assert all(r["point_id"] != got["located"]["point_id"] for r in got["results"])
    assert "def combine_ordered" in top["snippet"]


def test_related_takes_asks_filters(copies: Repo) -> None:
    got = _related(copies, "algo/merge.py:8", "--path", "net/", "-k", "1")
    assert len(got["results"]) == 1 and got["results"][0]["path"].startswith("net/")
    md = _related(copies, "algo/merge.py:8", "--lang", "markdown")
    assert {r["language"] for r in md["results"]} == {"markdown"}
    page = _related(copies, "algo/merge.py:8", "-k", "1", "--offset", "1")
    full = _related(copies, "algo/merge.py:8", "-k", "2")
    assert page["results"][0]["point_id"] == full["results"][1]["point_id"]


def test_related_reads_an_edited_file_from_the_work_tree(copies: Repo) -> None:
    copies.write("net/retry.py", "import os\n\n\n" + ORIGINAL.replace("merge_sorted_runs", "merge_again"))
    got = _related(copies, "net/retry.py:6")
    assert got["located"]["source"] == "worktree" and got["located"]["symbol"] == "merge_again"
    assert {r["path"] for r in got["results"][:2]} == {"algo/merge.py", "vendor_like/combine.py"}


def test_a_bad_location_is_one_line(copies: Repo) -> None:
    """A location that is no PATH:LINE is bad usage (exit 2, as every usage error); one that
    names nothing the index holds is a user-facing error (exit 1). One line either way."""
    for bad, says, code in (("algo/merge.py", "expected PATH:LINE", 2), ("algo/merge.py:0", "expected PATH:LINE", 2),
                            (":8", "expected PATH:LINE", 2), ("algo/merge.py:999", "holds line 999", 1),
                            ("nope.py:3", "has no chunks", 1)):
        proc = subprocess.run([sys.executable, "-m", "gitrag", "related", bad, "--repo", str(copies.path)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == code and says in proc.stderr, (bad, proc.returncode, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("with_daemon", [False, True])
def test_a_path_filter_that_names_no_indexed_file_is_one_line_with_the_nearest(
        copies: Repo, request: pytest.FixtureRequest, with_daemon: bool) -> None:
    """``related X --path P`` where no indexed file starts with P printed "no results", exit 0: now
    one line naming the nearest prefixes (or how to list the files), exit 1 as for a PATH that is
    not indexed; in --json too. A --path that matches, with nothing left by --lang, is still no results."""
    if with_daemon:
        request.getfixturevalue("daemon")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gitrag", "related", "algo/merge.py:8", *args, "--repo",
                               str(copies.path)], capture_output=True, text=True, check=False)

    for args, said in ((("--path", "nett/"), "--path nett/ matches no indexed file; nearest: net/"),
                       (("--path", "net/retyr.py", "--json"), "--path net/retyr.py matches no indexed file; nearest: "
                                                               "net/retry.py, net/http.py"),
                       (("--path", "zzzz/"), "--path zzzz/ matches no indexed file (`git ls-files` lists the "
                                             "repository's files)")):
        proc = run(*args)
        assert (proc.returncode, proc.stdout, proc.stderr.splitlines()) == (1, "", [f"gitrag: error: {said}"]), args
    left_out = run("--path", "net/", "--lang", "ruby")
    assert left_out.returncode == 0 and "no results" in left_out.stdout and left_out.stderr == ""


def test_mcp_find_related(copies: Repo, tmp_path) -> None:
    from tests.test_mcp import _drive, _gitrag_error, _ok

    async def body(s) -> None:
        got = await _ok(s, "find_related", path="algo/merge.py", line=8, k=3)
        assert got["located"]["symbol"] == "merge_sorted_runs" and got["location"] == "algo/merge.py:8"
        assert (got["results"][0]["path"], got["results"][0]["source"]) == ("vendor_like/combine.py", "index")
        assert got["up_to_date"] is True
        bad = await _gitrag_error(s, "find_related", path="/etc/passwd", line=1)
        assert "repository-relative" in bad or "absolute" in bad

    _drive(copies.path, tmp_path, body)


def test_a_location_typed_in_a_subfolder_or_absolute_names_the_same_file(copies: Repo) -> None:
    """A user in ``algo/`` types ``merge.py:8`` (what tab completion gives), or an absolute
    path: both mean ``algo/merge.py:8``; a path that names nothing still says so."""
    want = _related(copies, "algo/merge.py:8")["located"]
    for where, cwd in (("merge.py:8", copies.path / "algo"), (f"{copies.path / 'algo' / 'merge.py'}:8", copies.path)):
        proc = subprocess.run([sys.executable, "-m", "gitrag", "related", where, "--repo", str(copies.path), "--json"],
                              cwd=cwd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["located"] == want
    proc = subprocess.run([sys.executable, "-m", "gitrag", "related", "nothing.py:3", "--repo", str(copies.path)],
                          cwd=copies.path / "algo", capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "nothing.py" in proc.stderr and "Traceback" not in proc.stderr


ODD_NAMES = (b"caf\xe9.py", b"new\nline.py")  # a byte that is not UTF-8; a newline


def test_a_name_printed_quoted_is_taken_back(repo: Repo) -> None:
    """Names a shell cannot easily type are printed quoted as git prints them, and ``related``
    takes that spelling back, as git's own (``git ls-files``), and the raw bytes from a shell."""
    for raw in ODD_NAMES:
        (repo.path / raw.decode("utf-8", "surrogateescape")).write_bytes(b"def " + raw[:3] + b"_" + raw[4:7].replace(
            b"\n", b"_") + b"(x):\n    return x * 2\n")
    repo.write("plain.py", "def plain(x):\n    return x * 2\n")
    repo.commit("odd names")
    index(repo.path)
    listed = repo.git("-c", "core.quotePath=true", "ls-files").splitlines()
    assert listed == ['"caf\\351.py"', '"new\\nline.py"', "plain.py"]
    ask = subprocess.run([sys.executable, "-m", "gitrag", "ask", "x * 2", "--no-answer", "--repo", str(repo.path)],
                         capture_output=True, check=True)
    printed = sorted(line.split()[1].rsplit(b":", 1)[0].decode() for line in ask.stdout.splitlines()
                     if line.strip()[:1].isdigit())
    assert printed == listed  # as git prints them
    for raw, quoted in zip(ODD_NAMES, listed, strict=False):
        want = raw.decode("utf-8", "backslashreplace")  # the index's (and --json's) spelling
        for typed in (quoted, raw.decode("utf-8", "surrogateescape"), want):
            assert _related(repo, f"{typed}:1")["located"]["path"] == want, typed
    bad = subprocess.run([sys.executable, "-m", "gitrag", "related", '"caf\\9.py":1', "--repo", str(repo.path)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "is not one of git's escapes" in bad.stderr


def test_quoting_round_trips() -> None:
    from gitrag.git import quoting

    for raw in (b"plain/caf\xc3\xa9.py", b"caf\xe9.py", b"a\nb\t\"c\\d\x01\x7f.py", b"x\\xe9.py", b"\xff\xfe"):
        path = raw.decode("utf-8", "backslashreplace")
        assert quoting.unquote(quoting.quote(path)) == path, raw
    assert quoting.quote("plain/café.py") == "plain/café.py"  # UTF-8 as it is (core.quotePath=false)
    assert quoting.quote("a\nb.py") == '"a\\nb.py"' and quoting.quote("caf\\xe9.py") == '"caf\\351.py"'
    for bad in ('"a\\q"', '"a', '"\\400"'):
        with pytest.raises(ValueError):
            quoting.unquote(bad)


def _go_steps(name: str, n: int) -> str:
    body = "\n".join(f"\tstate = {name}Step{i}(state, cfg.weight{i % 7}, \"{name} step {i}\")" for i in range(n))
    return f"func {name}(cfg Config) int {{\n\tstate := 0\n{body}\n\treturn state\n}}\n"


def test_the_other_pieces_of_the_located_definition_are_left_out(repo: Repo) -> None:
    """A function too long for one chunk is cut into pieces that share its names and words:
    asked from one piece, the next piece of the same function came first (cobra's
    ``Command.ExecuteC``). The whole definition is the located place; a function like it
    elsewhere is the answer."""
    from gitrag.index.workspace import open_workspace
    from gitrag.query.related import related

    repo.write("run.go", "package app\n\n" + _go_steps("Execute", 90) + "\n" + _go_steps("Validate", 12))
    repo.write("other.go", "package app\n\n" + _go_steps("Prepare", 14))
    repo.commit("long functions")
    index(repo.path)
    with open_workspace(repo.path) as ws:
        pieces = [r for r in ws.state.points(ws.repo.branch(), ["run.go"]) if r.payload["symbol"] == "Execute"]
        assert len(pieces) >= 3  # the function was cut into pieces
        middle = sorted(pieces, key=lambda r: r.payload["start_line"])[1].payload
        response, located = related(ws, "run.go", middle["start_line"] + 1, k=5)
    assert located.symbol == "Execute"
    assert response.results and all(r.symbol != "Execute" for r in response.results)
    assert {r.symbol for r in response.results[:2]} == {"Validate", "Prepare"}
