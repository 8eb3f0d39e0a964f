"""gitrag.query.prefixes: the line for a --path / path_prefix that names no indexed file."""

from __future__ import annotations

from gitrag.query import prefixes

PATHS = ["util/strings.py", "util/numbers.py", "hooks/install.py", "README.md", "docs/guide/intro.md"]


def test_a_prefix_that_matches_says_nothing() -> None:
    for prefix in ("util/", "util", "util/str", "README.md", "docs/guide/"):
        assert prefixes.unmatched(PATHS, prefix, f"--path {prefix}") is None


def test_the_nearest_prefixes_are_cut_to_the_typed_depth() -> None:
    assert prefixes.nearest(PATHS, "utl/") == ["util/"]
    assert prefixes.nearest(PATHS, "util/strngs.py")[0] == "util/strings.py"
    assert prefixes.nearest(PATHS, "docs/guid/") == ["docs/guide/"]
    assert prefixes.unmatched(PATHS, "hoks", "--path hoks") == "--path hoks matches no indexed file; nearest: hooks/"


def test_nothing_near_says_how_to_list_the_files() -> None:
    assert prefixes.nearest(PATHS, "zzzz/") == []
    assert prefixes.unmatched(PATHS, "zzzz/", "path_prefix 'zzzz/'") == (
        "path_prefix 'zzzz/' matches no indexed file (`git ls-files` lists the repository's files)")
    assert prefixes.unmatched([], "src/", "--path src/") is not None  # an empty tree matches nothing
