"""Multi-query fusion of a pasted issue's parts (gitrag.query.ranking.parts, .multi)."""

from __future__ import annotations

from gitrag.index.workspace import open_workspace
from gitrag.query.ranking import Candidate, analyse, multi, parts
from gitrag.query.retrieval import ask
from tests.gitutil import Repo, index

ISSUE = """`--recursive=y` ignores `ignore-paths`
### Bug description

When running recursively, it seems `ignore-paths` in my settings in pyproject.toml is completely ignored

### Command used

```shell
pylint --recursive=y src/
```

### Pylint output

```shell
src/gen/about.py:2:0: R2044: Line with empty comment (empty-comment)
src/gen/about.py:4:0: R2044: Line with empty comment (empty-comment)
src/gen/about.py:57:0: C0301: Line too long (504/120) (line-too-long)
```

>>> from pkg.lint import run
>>> run(["src"])
Traceback (most recent call last):
  File "pkg/lint.py", line 3, in run
ValueError: bad path
"""


def test_an_issue_splits_into_title_prose_and_its_pasted_blocks() -> None:
    got = parts.split(ISSUE)
    assert got["title"] == ["`--recursive=y` ignores `ignore-paths`"]
    assert "running recursively" in got["prose"][0] and "ignore-paths" in got["prose"][0]
    assert "R2044" not in got["prose"][0] and ">>>" not in got["prose"][0] and "Traceback" not in got["prose"][0]
    code = got["code"]
    assert len(code) == 3  # the two fenced blocks and the REPL session with its trace (MAX_CODE_PARTS)
    assert any("ValueError: bad path" in c and ">>> run" in c for c in code)
    assert any("R2044" in c for c in code)
    assert not any("### Pylint output" in c for c in code)


def test_the_longest_blocks_are_kept_and_a_part_of_few_terms_is_dropped() -> None:
    blocks = "".join(f"```\nalpha{i} beta{i} gamma{i} delta{i} {'word ' * i}\n```\n" for i in range(6))
    got = parts.split("Title of the report here\nSome prose about the bug and more words.\n" + blocks + "```\nx\n```\n")
    assert len(got["code"]) == parts.MAX_CODE_PARTS
    assert all("alpha0" not in c for c in got["code"])  # the fewest terms went
    assert got["title"] == ["Title of the report here"]


def test_a_typed_question_or_a_single_part_gets_no_part_queries() -> None:
    assert multi.part_texts(analyse("how does the parser read options")) == []
    long_title_only = " ".join(f"word{i}" for i in range(80))
    assert multi.part_texts(analyse(long_title_only)) == []
    texts = multi.part_texts(analyse(ISSUE))
    assert texts[0].startswith("`--recursive=y`") and len(texts) == 5


def test_part_weights_count_repeats_sublinearly() -> None:
    w = parts.weights("ignore ignore ignore paths")
    assert w["paths"] == 1.0 and 2.0 < w["ignore"] < 2.2  # 1 + ln 3


def test_rrf_and_the_mix_with_the_whole_texts_fusion() -> None:
    assert multi.rrf([["a", "b"], ["b"]]) == {"a": 1 / 61, "b": 1 / 62 + 1 / 61}
    cands = {k: Candidate(k, f"{k}.py", 1, 2, score=s) for k, s in (("a", 1.0), ("b", 0.2), ("c", 0.0))}
    multi.fuse_parts(cands, [["c", "b"], ["c"]], weight=0.5)
    assert cands["c"].score == 0.5  # first in both part lists: the parts' full half
    assert cands["a"].score == 0.5  # first in the whole text's lists, in no part's
    assert abs(cands["b"].score - (0.1 + 0.5 * (1 / 62) / (2 / 61))) < 1e-12
    before = {k: c.score for k, c in cands.items()}
    multi.fuse_parts(cands, [])
    assert {k: c.score for k, c in cands.items()} == before


# -- through a real index -------------------------------------------------------------------------


WORDS = "the report renders the widget layout twice when the window is resized on a second screen"


def _crowded(repo: Repo) -> None:
    """120 files whose code says the issue's words (in ``pkg/stash/``, so the linked path's words are
    theirs too), and one (``pkg/stash.py``) that shares no other."""
    for i in range(120):
        repo.write(f"pkg/stash/view{i}.py", f'def render_{i}(widget, window):\n    """{WORDS} ({i})."""\n'
                                      f"    return widget.layout(window, screen={i})\n")
    repo.write("pkg/stash.py", "def keep(item):\n    box = []\n    box.append(item)\n    return box\n\n\n"
                               "def drop(box):\n    return box.pop()\n")
    repo.commit("views")
    index(repo.path)


def test_a_file_the_issue_links_to_joins_the_ranking_however_few_words_it_shares(repo: Repo) -> None:
    _crowded(repo)
    issue = (f"Layout rendered twice\n{WORDS}. " * 4 + "\nI think the cause is here: "
             "https://github.com/acme/app/blob/0123abc/pkg/stash.py#L7 then.\n")
    with open_workspace(repo.path) as ws:
        files = [f.path for f in ask(ws, issue, k=10, files=True, disable=("multi-query",)).files or []]
        without = [f.path for f in ask(ws, issue, k=10, files=True, disable=("named-files", "multi-query")).files
                   or []]
    assert files[0] == "pkg/stash.py"  # the linked file, raised by path-match once it is a candidate
    assert "pkg/stash.py" not in without  # no chunk of it reached either list's candidates


def test_links_to_repository_files_are_read() -> None:
    issue = ("Wrong output of latex for nested fractions\n" + "The printer drops brackets here. " * 12
             + "\nSee https://github.com/acme/app/blob/4f2c1e0/pkg/printing/latex.py#L120, and "
               "https://gitlab.com/acme/app/-/blob/main/pkg/str.py.\n\n```python\n>>> from pkg import latex\n"
               ">>> latex(frac(a, b)).strip()\n```\n>>> parse_latex('x')\nTraceback (most recent call last):\n"
               '  File "<stdin>", line 1, in <module>\nValueError: bad\n')
    q = analyse(issue)
    assert q.links == [("pkg/printing/latex.py", 120), ("pkg/str.py", 0)]
    assert q.paths[1:3] == ["pkg/printing/latex.py", "pkg/str.py"]  # after the frames
    assert analyse("see https://github.com/acme/app/blob/main/pkg/str.py").links == []  # a typed question: not read
