"""Quoted messages: a question that quotes what a program printed finds the code that prints it.

    "why do I get "called Execute() on a nil Command"" -> the quoted message (3+ words)
    -> retrieval adds the sparse list of the messages' own words (``MESSAGE_DEPTH`` deep) to
       the candidates
    -> :func:`boost_messages`: each candidate whose source holds runs of the message
       verbatim (``RUN_WORDS`` consecutive words or more, case and spacing aside) gains
       ``MESSAGE_BOOST`` x top score x the share of the message's words those runs cover

Why: an error string is the one part of a report that is copied from the program, and it
occurs in the code at the place that raises it (``fmt.Errorf("called Execute() on a nil
Command")`` in cobra's ``ExecuteC``). Read as words, its names (``Execute``, ``Command``)
are looked up as definitions and the ``Command`` struct won, above the function holding
the message, where the sparse list alone had that function first. Runs of words rather
than the whole string: a printed message has the values a format string leaves open
(``unknown command "foo" for "app"`` against ``"unknown command %q for %q"``), so the runs
between the values match. The boost equals the definition boost: a message quoted verbatim
names its source as surely as a name names its definition. Test files that assert the same
message are scaled by the path priors after this stage.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence

from gitrag.query.ranking.stages import DEFINITION_BOOST, Candidate, top_score

#: A double-quoted run of text (straight or typographic quotes; ``\"`` inside kept), on one line.
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.){8,300})"|\u201c([^\u201d\n]{8,300})\u201d')
_WORD = re.compile(r"\S+")
MIN_WORDS = 3  # fewer words are a name or a value ("utf-8", "--force"), not a message
RUN_WORDS = 3  # a run this long found verbatim in a chunk is the message's own text, not shared words
MAX_MESSAGES = 5  # a pasted issue may quote many strings; the first few are read
MAX_SCAN = 100_000  # characters of a question searched for messages (500 KB of logs: the first 100 KB)
MESSAGE_DEPTH = 20  # the messages' sparse list: its best chunks join the candidates
MESSAGE_BOOST = DEFINITION_BOOST
#: Candidates whose text is read, best first: the message's source is among the lists' best
#: (the sparse list of its words) or nowhere; reading every candidate's blob costs more.
READ_TOP = 120


def quoted_messages(text: str) -> list[str]:
    """The double-quoted strings of ``text`` with at least ``MIN_WORDS`` words, in order,
    without repeats, at most ``MAX_MESSAGES`` (escaped quotes inside unescaped)."""
    out: list[str] = []
    for m in _QUOTED.finditer(text[:MAX_SCAN]):
        body = (m.group(1) if m.group(1) is not None else m.group(2)).replace('\\"', '"').strip()
        if len(_WORD.findall(body)) >= MIN_WORDS and sum(ch.isalpha() for ch in body) >= 8:
            out.append(body)
    return list(dict.fromkeys(out))[:MAX_MESSAGES]


#: What a printed message fills in and its format string leaves open, in either text: a short
#: quoted value (``"name"``, ``'x'``; the code's ``"%s"``), a format verb (``%q``, ``%-5d``,
#: ``%(name)s``), a placeholder (``{}``, ``{0}``, ``{name}``, ``${x}``) or a number.
_OPEN = re.compile(r"\"[^\"\s]{0,40}\"|'[^'\s]{0,40}'|%(?:\(\w+\))?[-+#0 ]*\d*(?:\.\d+)?[a-zA-Z]|\$?\{[^{}\s]{0,40}\}"
                   r"|(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_SLOT = "\x00"
_SLOTS = re.compile("(?:\x00\\s*)+")


#: A line of pasted output that states an error: an exception's (``TypeError: ...``,
#: ``java.lang.IllegalStateException: ...``) or a program's (``error: ...``, ``Error: ...``,
#: ``fatal: ...``, ``panic: ...``, rustc's ``error[E0308]: ...``); the message is after the colon.
_ERROR_LINE = re.compile(r"^\s*(?:[\w.$]*(?:Error|Exception|Warning|Panic)|error|Error|ERROR|fatal|FATAL|panic|"
                         r"warning)(?:\[\w+\])?:\s+(\S.{6,298}\S)\s*$", re.M)


def error_lines(text: str) -> list[str]:
    """The messages of ``text``'s error lines (:data:`_ERROR_LINE`) with at least ``MIN_WORDS``
    words, in order, without repeats, at most ``MAX_MESSAGES``: what the program printed,
    quoted or not."""
    out = [m.group(1).strip() for m in _ERROR_LINE.finditer(text[:MAX_SCAN])]
    return list(dict.fromkeys(m for m in out if len(_WORD.findall(m)) >= MIN_WORDS))[:MAX_MESSAGES]


@functools.lru_cache(maxsize=8)
def of_question(text: str, quoted: bool = True, errors: bool = True) -> tuple[str, ...]:
    """The messages a question quotes (:func:`quoted_messages`) and, with ``errors``, those of
    its error lines (:func:`error_lines`), at most ``MAX_MESSAGES``. Memoised: retrieval (the
    messages' own sparse list) and the ranking pipeline both ask it of the same question."""
    found = (quoted_messages(text) if quoted else []) + (error_lines(text) if errors else [])
    return tuple(dict.fromkeys(found))[:MAX_MESSAGES]


def _normal(text: str) -> str:
    """Lower-cased, spacing collapsed, every open value (:data:`_OPEN`) one slot."""
    return " ".join(_SLOTS.sub(_SLOT + " ", _OPEN.sub(" " + _SLOT + " ", text)).lower().split())


def literal_lines(text: str) -> str:
    """The lines of ``text`` that hold a quote character (``"``, ``'``, a backtick): where
    string literals are, in every language the chunker reads; a docstring's or comment's
    inner lines are left out."""
    return "\n".join(line for line in text.splitlines() if any(q in line for q in "\"'`"))


class Message:
    """One message read for matching: its words (:func:`_normal`), the runs of ``RUN_WORDS``
    words that can count (two of them with letters) by first word, and its words that are
    not slots."""

    def __init__(self, message: str) -> None:
        self.words = _normal(message).split()
        self.runs = [(i, " ".join(self.words[i:i + RUN_WORDS])) for i in range(len(self.words) - RUN_WORDS + 1)
                     if sum(any(ch.isalpha() for ch in w) for w in self.words[i:i + RUN_WORDS]) >= 2]
        self.real = [i for i, w in enumerate(self.words) if w != _SLOT]  # values filled in: no evidence either way

    def share(self, hay: str) -> float:
        """The share of the message's real words in its runs found in ``hay`` (normalised)."""
        if not self.real:
            return 0.0
        covered = [False] * len(self.words)
        for i, run in self.runs:
            if run in hay:
                covered[i:i + RUN_WORDS] = [True] * RUN_WORDS
        return sum(covered[i] for i in self.real) / len(self.real)


def coverage(message: str, text: str) -> float:
    """The share of ``message``'s words that lie in runs of ``RUN_WORDS`` or more consecutive
    words (two of them with letters) found verbatim in the string-literal lines of ``text``
    (:func:`literal_lines`; both lower-cased, spacing collapsed, values and format verbs one
    slot: ``required flag(s) "name" not set`` holds the runs of ``required flag(s) "%s" not
    set``), as a share of the message's words that are not slots; 0.0 to 1.0."""
    return Message(message).share(_normal(literal_lines(text)))


def boost_messages(cands: dict[str, Candidate], messages: Sequence[str],
                   texts: Callable[[list[Candidate]], dict[str, str]], listed: Collection[str] = ()) -> None:
    """Add ``MESSAGE_BOOST`` x top score x the best :func:`coverage` over ``messages`` to each of
    the best ``READ_TOP`` candidates that the sparse list scored (a chunk holding a message
    holds its words) and to those of ``listed`` (the messages' own sparse list) (in place);
    ``texts(cands)`` gives ``{key: source text}``."""
    top = top_score(cands)
    read = [m for m in (Message(x) for x in messages) if m.runs]
    if not read or top <= 0:
        return
    extra = set(listed)
    ranked = sorted(cands.values(), key=Candidate.sort_key)
    best = [c for c in ranked[:READ_TOP] if c.sparse is not None or c.key in extra]
    best += [c for c in ranked[READ_TOP:] if c.key in extra]
    for key, text in texts(best).items():
        lines = literal_lines(text)
        if not lines:
            continue
        hay = _normal(lines)
        share = max(m.share(hay) for m in read)
        if share > 0:
            cands[key].score += MESSAGE_BOOST * top * share
