"""File names as git prints them, both ways: C-style quoting (``core.quotePath``).

git writes a path that holds a control character, a double quote or a backslash, or bytes
that are not UTF-8, between double quotes with C escapes (``"a\\nb.py"``, ``"caf\\351.py"``:
``git status``, ``git ls-files``, ``git diff``); every other path, UTF-8 names included, as it
is (what git does with ``core.quotePath=false``). gitrag's human output writes paths so, and
every command that takes a path (``related PATH:LINE``) reads them back, so a name a shell
cannot easily type can be copied from gitrag's output, or from git's.

An index path is git's bytes decoded as UTF-8 with ``\\xNN`` for a byte that is not
(``gitrag.git.repo.decode_path``); :func:`path_bytes` undoes that: ``\\xNN`` with NN from
80 to ff is that byte (``backslashreplace`` escapes no other). Standard library only.
"""

from __future__ import annotations

import re

_ESCAPES = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r", '"': '"', "\\": "\\"}
_UNESCAPES = {v: k for k, v in _ESCAPES.items()}
_RAW_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


def path_bytes(path: str) -> bytes:
    """The bytes git holds for the index path ``path`` (the inverse of ``decode_path``)."""
    parts = _RAW_BYTE.split(path)  # text, byte, text, byte, ..., text
    out = bytearray()
    for i, part in enumerate(parts):
        out += bytes([int(part, 16)]) if i % 2 else part.encode("utf-8", "surrogateescape")
    return bytes(out)


def decode_path(raw: bytes) -> str:
    """Bytes of a path as the index spells them (as ``gitrag.git.repo.decode_path``, which needs pygit2)."""
    return raw.decode("utf-8", "backslashreplace")


def needs_quotes(path: str) -> bool:
    """Whether git would quote the index path ``path`` (a control character, ``"``, ``\\``, or a
    byte that is not UTF-8)."""
    return any(c in _ESCAPES or ord(c) < 0x20 or ord(c) == 0x7F for c in path)


def quote(path: str) -> str:
    """The index path ``path`` as git prints it: as it is, or quoted with C escapes (octal
    ``\\ooo`` for a byte that is not UTF-8 and for control characters without a letter)."""
    if not needs_quotes(path):
        return path
    raw = path_bytes(path)
    text = raw.decode("utf-8", "surrogateescape")
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append("\\" + _ESCAPES[c])
        elif "\udc80" <= c <= "\udcff":  # a byte that is not UTF-8
            out.append(f"\\{ord(c) - 0xDC00:03o}")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def unquote(text: str) -> str:
    """``text`` as an index path: a git-quoted path (``"a\\nb.py"``, ``"caf\\351.py"``, a name
    ``git status`` printed) is unquoted to its bytes and decoded as the index decodes them;
    anything else is returned as it is. Raises ValueError for a quoted path whose escapes are
    not git's (an unknown letter, an octal byte over 377, the closing quote missing)."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        if text.startswith('"'):
            raise ValueError(f"{text} opens a quoted path (as git prints one) but does not close it")
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _UNESCAPES:
            out += _UNESCAPES[nxt].encode()
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raise ValueError(f"{text}: {body[i:i + 4]} is not one of git's escapes in a quoted path "
                             "(\\n, \\t, \\\", \\\\, \\ooo, ...)")
    return decode_path(bytes(out))
