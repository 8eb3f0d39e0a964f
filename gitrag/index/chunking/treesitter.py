"""Budgeted tree-sitter parsing with one cached parser per language.

Each grammar is the language's own PyPI wheel (``tree-sitter-python``, ...), compiled and
offline: nothing downloads at run time, and only the wheel of a language being parsed is
imported (:data:`GRAMMARS`).
Parsing is skipped for files that would be slow or pointless to parse (very large files,
minified lines), and aborted through the progress callback after a deadline.
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any

MAX_PARSE_BYTES = 1_000_000  # larger files go to windows without parsing
MAX_LINE_BYTES = 10_000  # a longer line means minified/generated code: windows
PARSE_DEADLINE_S = 5.0  # generous, so results do not depend on machine load
_READ_BLOCK = 1 << 16

# chunker language -> (module of its grammar wheel, function returning the TSLanguage pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "php": ("tree_sitter_php", "language_php"),  # PHP in HTML (``php_only`` needs no ``<?php``)
    "ruby": ("tree_sitter_ruby", "language"),
}

_languages: dict[str, Any] = {}
_parsers = threading.local()  # by_language: {language: Parser}, one per thread (see get_parser)


def get_language(language: str) -> Any:
    """The cached ``tree_sitter.Language`` for ``language`` (a key of :data:`GRAMMARS`).

    Imports only that language's wheel. Raises ``LookupError`` for a language without a
    grammar, ``ImportError`` when its wheel is not installed, ``ValueError`` when the
    grammar's ABI is one the installed ``tree_sitter`` cannot load.
    """
    lang = _languages.get(language)
    if lang is None:
        if language not in GRAMMARS:
            raise LookupError(f"no tree-sitter grammar for {language!r}")
        from tree_sitter import Language

        module, function = GRAMMARS[language]
        lang = _languages[language] = Language(getattr(importlib.import_module(module), function)())
    return lang


def get_parser(language: str) -> Any:
    """This thread's cached ``tree_sitter.Parser`` for ``language``; raises as :func:`get_language`.

    One per thread: a Parser is not thread-safe (two threads parsing with one crashed the
    daemon in tree-sitter's C code, its sync worker and its work-tree warm-up chunking at
    once); a Language is, and stays shared."""
    parsers = getattr(_parsers, "by_language", None)
    if parsers is None:
        parsers = _parsers.by_language = {}
    parser = parsers.get(language)
    if parser is None:
        from tree_sitter import Parser

        parser = parsers[language] = Parser(get_language(language))
    return parser


def skip_reason(data: bytes) -> str:
    """Why ``data`` should not be parsed at all ("" when it may be)."""
    if len(data) > MAX_PARSE_BYTES:
        return f"file larger than {MAX_PARSE_BYTES} bytes"
    if len(data) > MAX_LINE_BYTES and max(map(len, data.split(b"\n"))) > MAX_LINE_BYTES:
        return f"line longer than {MAX_LINE_BYTES} bytes"
    return ""


def parse(language: str, data: bytes) -> tuple[Any | None, str]:
    """Parse ``data``; returns ``(tree, "")`` or ``(None, reason)``. Never raises."""
    reason = skip_reason(data)
    if reason:
        return None, reason
    try:
        parser = get_parser(language)
    except Exception as exc:  # noqa: BLE001 - a missing grammar is a fallback, not an error
        return None, f"no grammar for {language}: {type(exc).__name__}"
    deadline = time.monotonic() + PARSE_DEADLINE_S

    def read(offset: int, _point: Any) -> bytes:
        return data[offset : offset + _READ_BLOCK]

    def progress(*_state: Any) -> bool:
        return time.monotonic() > deadline

    try:
        tree = parser.parse(read, progress_callback=progress)
    except Exception as exc:  # noqa: BLE001 - aborted or failed parse: windows
        return None, f"parse failed: {type(exc).__name__}"
    if tree is None:
        return None, "parse aborted"
    return tree, ""
