"""Budgeted tree-sitter parsing with one cached parser per language.

Grammars come bundled with ``tree_sitter_language_pack`` 0.13.0 (nothing downloads).
Parsing is skipped for files that would be slow or pointless to parse (very large files,
minified lines), and aborted through the progress callback after a deadline.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

MAX_PARSE_BYTES = 1_000_000  # larger files go to windows without parsing
MAX_LINE_BYTES = 10_000  # a longer line means minified/generated code: windows
PARSE_DEADLINE_S = 5.0  # generous, so results do not depend on machine load
_READ_BLOCK = 1 << 16

_parsers: dict[str, Any] = {}


def get_parser(language: str) -> Any:
    """The cached ``tree_sitter.Parser`` for ``language``; raises ``LookupError`` if unknown."""
    parser = _parsers.get(language)
    if parser is None:
        from tree_sitter_language_pack import get_parser as _load

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parser = _load(language)  # type: ignore[arg-type]
        _parsers[language] = parser
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
