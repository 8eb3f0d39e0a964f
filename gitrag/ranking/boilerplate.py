"""The parts of an issue text that every issue of a project shares, removed before it is read.

Issue templates put the same words into every report: HTML comments with instructions
(``<!-- Please describe ... -->``), checklists (``- [x] I searched the existing issues``),
headings (``### Steps to reproduce``, ``**Expected behavior**``), and an environment
section (``OS: macOS 14.2``, ``Python version: 3.12.1``, ``pip freeze`` output). None of
it says where the bug is, yet its words reach the sparse terms and, at the start of the
text, the 256 tokens the dense side embeds. :func:`strip` removes them and keeps everything
else (the prose, the code, the tracebacks, the expected and actual output under those
headings). Linear in the text: one pass over its lines, HTML comments found with
``str.find``.
"""

from __future__ import annotations

import re

#: Headings of the common issue templates (GitHub's defaults and the big projects'): the
#: heading line goes, what is under it stays.
_TEMPLATE_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s*|\*\*|__)?\s*(?:describe the bug|bug description|description|summary|to reproduce|"
    r"steps to reproduce(?: the (?:bug|problem|issue))?|reproduction(?: steps)?|minimal (?:reproducible )?example|"
    r"(?:expected|actual|current|observed) (?:behaviou?r|result|output)|what (?:happened|did you expect[^\n]*)|"
    r"screenshots?|possible (?:solution|fix)|additional (?:context|information|info)|motivation|checklist|"
    r"context|details|problem|issue|bug report|feature request|proposal|alternatives considered|"
    r"(?:is your feature request related to a problem[^\n]*)|(?:describe the solution you'd like)|"
    r"(?:describe alternatives you've considered))\s*:?\s*(?:\*\*|__)?\s*:?\s*$",
    re.I,
)
#: Headings that open an environment section: everything under them, to the next heading, goes.
_ENV_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s*|\*\*|__)?\s*(?:your )?(?:environment|env|versions?|version information|system info(?:rmation)?|"
    r"platform|setup|installed (?:packages|versions)|dependencies|(?:output of )?(?:pip freeze|pip list|"
    r"npm ls|go version|go env|rustc -vv?|cargo version|java -version|uname -a)[^\n]*)\s*:?\s*(?:\*\*|__)?\s*:?\s*$",
    re.I,
)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+\S|\*\*[^*\n]+\*\*\s*:?\s*$|__[^_\n]+__\s*:?\s*$)")
_CHECKBOX = re.compile(r"^\s*(?:[-*+]|\d+\.)\s*\[[ xX]?\]")
#: ``OS: macOS 14.2``, ``- Python version: 3.12.1``, ``**Go**: 1.22``, ``rustc 1.75.0``, ``pkg==1.2.3``
_VERSION_LINE = re.compile(
    r"^\s*(?:[-*+]\s*)?(?:\*\*|__)?[\w .()/+-]{1,40}?(?:\*\*|__)?\s*"
    r"(?:[:=]\s*(?:\w+\s+){0,2}v?\d+(?:\.\d+)+[\w.+-]*(?:\s+\S+){0,4}|\s+v?\d+(?:\.\d+)+[\w.+-]*)\s*$"
    r"|^\s*[\w.-]+\s*(?:==|@)\s*v?\d+(?:\.\d+)+\S*\s*$"
)


def strip(text: str) -> str:
    """``text`` without HTML comments, template headings, checklist lines, environment
    sections and version lines (see the module docstring); other lines unchanged, in order.
    Fenced code blocks are kept whole: what is inside is pasted code or output."""
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
        if _ENV_HEADING.match(line):
            in_env = True
            continue
        if _HEADING.match(line) or _TEMPLATE_HEADING.match(line):
            in_env = False
            if _TEMPLATE_HEADING.match(line):
                continue
        if in_env or _CHECKBOX.match(line) or _VERSION_LINE.match(line):
            continue
        out.append(line)
    return "\n".join(out)


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
