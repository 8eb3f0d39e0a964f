"""Command-line values made ready for the commands, without click: the text and path forms
every command uses, and the quick parse of the hot ``gitrag ask`` form.

:func:`quick_ask` exists for one cost: importing click is about 40 ms of a ~100 ms client
(bench/bench_daemon.py, "client CPU per ask"). It reads only the plain, valid forms of
``gitrag ask`` and declines everything else (``--help``, a bad value, an option it does not
know, ``--lang``, ``--exclude``, a question from stdin, an empty or too long question or one holding
a NUL) by returning None, so that click
parses those and gives its own help and usage errors: a command line either means the same
to both parsers or is click's alone (tests/test_quick_ask.py compares them).
"""

from __future__ import annotations

import os
import re
from typing import Any

from gitrag.query.results import MAX_K

#: ``gitrag ask``'s options as the quick parse reads them: name -> (parameter, kind), kind
#: ``flag``, ``text``, a ``(low, high)`` integer range or a tuple of choices (as cli.ask).
_ASK_OPTIONS: dict[str, tuple[str, Any]] = {
    "--repo": ("repo", "text"), "-k": ("k", (1, MAX_K)), "--mode": ("mode", ("hybrid", "dense", "sparse")),
    "--path": ("path", "text"), "--rev": ("rev", "text"), "--offset": ("offset", (0, 10_000)),
    "--expand": ("expand", (0, 3)), "--files": ("files", "flag"), "--no-answer": ("no_answer", "flag"),
    "--blame": ("blame", "flag"), "--committed": ("committed", "flag"), "--json": ("as_json", "flag"),
}
#: cli.ask's defaults for the parameters above (tests/test_quick_ask.py checks them against click's).
ASK_DEFAULTS: dict[str, Any] = {"repo": ".", "k": 10, "mode": "hybrid", "path": "", "lang": "", "exclude": (),
                                "files": False, "no_answer": False, "expand": 0, "blame": False,
                                "committed": False, "rev": "", "offset": 0, "as_json": False}
_NUMBER = re.compile(r"[0-9]{1,6}")


def text(value: str) -> str:
    """A command-line text as UTF-8: bytes that are not UTF-8 (surrogate escapes in argv) become U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def repo_path(value: str) -> str:
    """A command-line path or glob spelled as indexed paths are (``gitrepo.decode_path``): a byte
    that is not UTF-8 becomes ``\\xNN``, so ``--path`` meets a file whose name holds it."""
    return os.fsencode(value).decode("utf-8", "backslashreplace")  # gitrepo.decode_path, without importing pygit2


def quick_ask(argv: list[str]) -> dict[str, Any] | None:
    """The parameters of ``gitrag ask ARGV`` (the words after ``ask``) as cli.ask passes them on
    (``question`` and every key of :data:`ASK_DEFAULTS`, texts and paths already made ready),
    or None when the command line is not one of the plain valid forms: then click parses it.

    Read: one QUESTION (after ``--`` too), ``--opt VALUE``, ``--opt=VALUE``, ``-k N``, ``-kN``,
    flags; an option given twice keeps the last value, as click does."""
    from gitrag.daemon.protocol import MAX_QUESTION

    params = dict(ASK_DEFAULTS)
    question: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            question.extend(words)
            break
        if not word.startswith("-") or word == "-":
            question.append(word)
            continue
        if word.startswith("--"):
            name, sep, value = word.partition("=")
            inline = sep == "="
        else:
            name, value = word[:2], word[2:]
            inline = value != ""
        if name not in _ASK_OPTIONS:
            return None
        param, kind = _ASK_OPTIONS[name]
        if kind == "flag":
            if inline:
                return None
            params[param] = True
            continue
        if not inline:
            following = next(words, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        got = _value(value, kind)
        if got is None:
            return None
        params[param] = got
    if len(question) != 1 or question[0] == "-":
        return None
    asked = text(question[0])
    if not asked.strip() or "\0" in asked or len(asked) > MAX_QUESTION:
        return None  # click's ask gives the one-line error (cli._question)
    params.update(question=asked, path=repo_path(params["path"]))
    return params


def _value(value: str, kind: Any) -> Any:
    """``value`` read as ``kind`` (see _ASK_OPTIONS), or None where click would refuse it."""
    if kind == "text":
        return value
    if isinstance(kind[0], str):
        return value if value in kind else None
    if not _NUMBER.fullmatch(value):
        return None
    number = int(value)
    return number if kind[0] <= number <= kind[1] else None
