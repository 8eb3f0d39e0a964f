"""The parts of an issue text that every issue of a project shares, removed before it is read.

Issue templates put the same words into every report: HTML comments with instructions
(``<!-- Please describe ... -->``), checklists (``- [x] I searched the existing issues``),
headings (``### Steps to reproduce``, ``**Expected behavior**``), and an environment
section (``OS: macOS 14.2``, ``Python version: 3.12.1``, ``pip freeze`` output). None of
it says where the bug is, yet its words reach the sparse terms and, at the start of the
text, the 256 tokens the dense side embeds. :func:`strip` removes them and keeps everything
else (the prose, the code, the tracebacks, the expected and actual output under those
headings). Linear in the text: one pass over its lines, each tried only against patterns
its length allows; HTML comments found with ``str.find``.
"""

from __future__ import annotations

import re

#: Headings of the common issue templates (GitHub's defaults and the big projects'): the
#: heading line goes, what is under it stays. Matched on the heading's words (the line
#: without ``#``, ``**``, ``__`` and a closing colon), lower-cased.
_TEMPLATE_KEY = re.compile(
    r"(?:describe the bug|bug description|description|summary|to reproduce|"
    r"steps to reproduce(?: the (?:bug|problem|issue))?|reproduction(?: steps)?|minimal (?:reproducible )?example|"
    r"(?:expected|actual|current|observed) (?:behaviou?r|result|output)|what happened\??|what did you expect.*|"
    r"screenshots?|possible (?:solution|fix)|additional (?:context|information|info)|motivation|checklist|"
    r"context|details|problem|issue|bug report|feature request|proposal|alternatives considered|"
    r"is your feature request related to a problem.*|describe the solution you'd like|"
    r"describe alternatives you've considered)"
)
#: Headings that open an environment section: everything under them, to the next heading, goes.
_ENV_KEY = re.compile(
    r"(?:your )?(?:environment|env|versions?|version information|system info(?:rmation)?|platform|setup|"
    r"installed (?:packages|versions)|dependencies|(?:output of )?(?:pip freeze|pip list|npm ls|go version|go env|"
    r"rustc -vv?|cargo version|java -version|uname -a).*)"
)
HEADING_CHARS = 60  # a heading's words are short; longer lines are never tried as one
SHORT_LINE = 120  # characters: longer lines are prose or pasted output, never a heading or a version line
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+\S|\*\*[^*\n]+\*\*\s*:?\s*$|__[^_\n]+__\s*:?\s*$)")
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+\.)\s*\[[ xX]?\]")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+[\w.+-]*")  # a version as one word: 3.12.1, v1.2.0-rc1
_PIN = re.compile(r"^\s*[\w.-]+\s*(?:==|@)\s*v?\d+(?:\.\d+)+\S*\s*$")  # pip freeze: pkg==1.2.3
_KEY = re.compile(r"[\s*+_-]*[\w .()/+-]{1,40}[*_]*")  # the key of ``- **OS**: macOS 14.2``


def strip(text: str) -> str:
    """``text`` without HTML comments, template headings, checklist lines, environment
    sections and version lines (see the module docstring); other lines unchanged, in order.
    Fenced code blocks are kept whole (what is inside is pasted code or output), except
    inside an environment section."""
    text = _without_comments(text)
    out: list[str] = []
    in_env = False
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            if not in_env:
                out.append(line)
            continue
        if in_fence:
            if not in_env:
                out.append(line)
            continue
        short = len(line) <= SHORT_LINE
        key = _heading_key(line) if short else ""
        if key and _ENV_KEY.fullmatch(key):
            in_env = True
            continue
        template = bool(key) and _TEMPLATE_KEY.fullmatch(key) is not None
        if template or (short and line.lstrip()[:1] in ("#", "*", "_") and _HEADING.match(line)):
            in_env = False
            if template:
                continue
        if in_env or ("[" in line and _CHECKBOX.match(line)) or (short and _version_line(line)):
            continue
        out.append(line)
    return "\n".join(out)


def _heading_key(line: str) -> str:
    """The words of a possible heading line, lower-cased ("" when too long to be one)."""
    key = line.strip().strip("#*_ ").rstrip(":").strip("*_ ").lower()
    return key if len(key) <= HEADING_CHARS else ""


def _version_line(line: str) -> bool:
    """``OS: macOS 14.2``, ``- Python version: 3.12.1``, ``**Go**: 1.22``, ``rustc 1.75.0``,
    ``pkg==1.2.3``: a short key and a value of a few words holding a version."""
    if "." not in line or not any(ch.isdigit() for ch in line):
        return False
    if _PIN.match(line):
        return True
    key, sep, value = line.partition(":")
    if not sep:
        key, sep, value = line.partition("=")
    if sep:
        words = value.split()
        return 0 < len(words) <= 6 and _KEY.fullmatch(key) is not None and any(_VERSION.fullmatch(w) for w in words)
    words = line.split()
    return 2 <= len(words) <= 3 and _VERSION.fullmatch(words[-1]) is not None


def _without_comments(text: str) -> str:
    """``text`` without ``<!-- ... -->`` comments; an unclosed one runs to the end."""
    if "<!--" not in text:
        return text
    parts: list[str] = []
    at = 0
    while True:
        start = text.find("<!--", at)
        if start < 0:
            parts.append(text[at:])
            break
        parts.append(text[at:start])
        end = text.find("-->", start + 4)
        if end < 0:
            break
        at = end + 3
    return "".join(parts)
