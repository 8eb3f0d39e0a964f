"""The quick parse of ``gitrag ask`` (gitrag.surfaces.args.quick_ask) means what click means.

Every command line it accepts gives the parameters click's ``ask`` gives (the same texts and
paths made ready), every one it declines is left to click, and its defaults are click's: a
property over generated command lines, and the forms a user types, side by side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitrag.surfaces.args import ASK_DEFAULTS, quick_ask, repo_path, text
from gitrag.surfaces.cli import cli


def _clicks(argv: list[str]) -> dict[str, Any] | None:
    """What click's ``ask`` hands the command for ``argv``, or None where click refuses it."""
    command = cli.commands["ask"]
    try:
        ctx = command.make_context("ask", list(argv), resilient_parsing=False)
    except (click.exceptions.Exit, click.UsageError):
        return None
    params = dict(ctx.params)
    params.update(question=text(params["question"]), path=repo_path(params["path"]),
                  exclude=tuple(params["exclude"]))
    return params


def test_the_defaults_are_clicks() -> None:
    clicks = _clicks(["q"])
    assert clicks is not None
    assert {name: v for name, v in clicks.items() if name != "question"} == ASK_DEFAULTS


@pytest.mark.parametrize("argv", [
    ["where are hooks installed"],
    ["retry policy", "--no-answer", "-k", "3"],
    ["retry policy", "-k3", "--json", "--repo", "/some/where"],
    ["--files", "--repo=..", "retry", "--mode", "sparse", "--offset", "10"],
    ["retry", "--path", "./doc", "--committed", "--blame", "--expand", "2"],
    ["retry", "--rev", "v1.0", "-k", "5", "-k", "7"],
    ["--", "-starts with a dash"],
    ["caf\udce9 na\udcefve"],  # bytes that are not UTF-8, as argv gives them
])
def test_plain_forms_are_read_as_click_reads_them(argv: list[str]) -> None:
    quick = quick_ask(argv)
    assert quick is not None
    assert quick == _clicks(argv)


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["-h", "x"], ["x", "-k", "0"], ["x", "-k", "201"], ["x", "-k", "three"], ["x", "--mode", "fuzzy"],
    ["x", "--lang", "python"], ["x", "--exclude", "docs/**"], ["-"], ["   "], ["x", "y"], ["x", "--json=1"],
    ["x", "--nope"], ["x", "--repo"], ["x", "--expand", "4"], ["x", "-k", "-3"], ["x" * 500_001], ["slug\0ify"],
])
def test_other_forms_are_left_to_click(argv: list[str]) -> None:
    assert quick_ask(argv) is None


_WORDS = st.sampled_from(["-k", "--repo", "--mode", "--path", "--rev", "--offset", "--expand", "--files", "--no-answer",
                          "--blame", "--committed", "--json", "--lang", "--", "-", "--k", "-kx", "-k5", "--mode=dense",
                          "--offset=3", "--json=", "3", "0", "200", "hybrid", "dense", "sparse", "src/", "a question",
                          "x", "", " ", "-x", "--help"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_WORDS, max_size=7))
def test_whatever_it_accepts_click_reads_the_same(argv: list[str]) -> None:
    quick = quick_ask(argv)
    if quick is not None:
        assert quick == _clicks(argv), argv


def _run(entry: str, repo: Path) -> tuple[int, list[str], str]:
    """(exit code, click modules imported, stderr) of ``gitrag ask`` started at ``entry``."""
    code = ("import json, sys\n"
            "sys.argv = ['gitrag', 'ask', 'anything at all', '--no-answer', '--repo', sys.argv[1]]\n"
            f"{entry}\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
            "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] == 'click')]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True, text=True, timeout=120,
                          check=False)
    got, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    return got, modules, proc.stderr


def test_the_entry_point_asks_without_click_and_ends_as_click_does(tmp_path: Path) -> None:
    """The real entry point with a command line the quick parse takes imports no click, and
    the command ends as it does when click parses it (here: not a repository, exit 1)."""
    quick = _run("from gitrag.surfaces.entry import main", tmp_path)
    clicked = _run("from gitrag.surfaces.cli import cli\nmain = lambda: cli(prog_name='gitrag')", tmp_path)
    assert quick[1] == [] and "click" in clicked[1]
    assert quick[0] == clicked[0] == 1
    assert quick[2] == clicked[2] and "git repository" in quick[2], (quick[2], clicked[2])
