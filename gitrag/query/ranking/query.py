"""What a question says, read before any search: its type, the code names in it, and, for a
long question (a pasted issue, traceback or test output), the parts that carry the signal.

:func:`analyse` turns the question text into a :class:`Query`:

- ``symbol_like``: the whole question is one code token (``HTTPAdapter``, ``Sinatra::Base``,
  ``_private``, ``Flask``, a private member ``#fetch``, a ``$var``), back-quoted or not; a
  lower-case single word (``session``) is a natural-language query (semble 0.7.0's rule, MIT).
- ``identifiers``: code names written in the question (:func:`query_identifiers`), and
  ``capitalised``: plain capitalised words not at a sentence start (``Depends`` in
  "how is Depends resolved") and the word of a one-word question, which count only where
  the symbol graph defines a name spelled exactly so.
- For a long question (more than ``LONG_WORDS`` words or a traceback): traceback frames
  ``File "x.py", line N, in f``, file paths, exception names, back-quoted and fenced code;
  ``dense_text`` is then a digest of those parts (a 256-token embedder sees only the start
  of the raw text, which for an issue is greetings and for a traceback the outermost frame)
  and ``term_weights`` gives each sparse term ``1 + log(tf)``, doubled for terms of code names,
  so a word repeated in a log does not count once per line but rare code names stand out
  (rarity across the index, IDF, is applied by the store on top).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from gitrag.query.ranking import boilerplate, traces
from gitrag.query.ranking.traces import Frame

LONG_WORDS = 60  # beyond this a question is treated as pasted text (an issue, a log)
DENSE_CHARS = 1200  # digest length for a long question: about the embedder's 256 tokens
MAX_TERMS = 256  # sparse terms kept for a long question, highest weight first (bounds latency)
CODE_TERM_BOOST = 2.0  # weight multiplier of terms that come from code names, paths and frames

_BACKTICK = re.compile(r"`([^`\s]{2,80})`")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
#: A code token: a name, optionally led by a sigil (``#`` of a JavaScript/TypeScript private
#: member, ``$`` of a PHP/shell variable or a JavaScript name) and qualified by ``.``, ``::``,
#: ``#`` or ``->``. ``@`` is no sigil here: in an issue it is a person (``@octocat``).
_TOKEN = re.compile(r"(?<![\w#$])#?[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)#?[A-Za-z_$][\w$]*)*(?:\(\))?")
#: A sigil-led name (``#fetch``, ``$config``): the sigil is part of how the code spells it.
SIGIL = re.compile(r"^[#$][A-Za-z_][\w$]*$")
_CAMEL_INNER = re.compile(r"[a-z0-9][A-Z]")
_CAPITALISED = re.compile(r"(?<![\w.`])([A-Z][A-Za-z0-9]*[a-z0-9][A-Za-z0-9]*|[A-Z]{2,}[a-z]*)(?![\w`])")
_SENTENCE_MARKS = ".!?:"  # the last non-space character before a sentence's first word
_SYMBOL_QUERY = re.compile(
    r"^(?:[A-Za-z_$][\w$]*(?:(?:::|\\|->|\.|#)#?[A-Za-z_$][\w$]*)+"  # qualified: a.b, A::B, Ky.#fetch
    r"|_[\w$]*"  # leading underscore
    r"|[A-Za-z][A-Za-z0-9]*[A-Z_][\w]*"  # an inner capital or underscore: getUser, field_validator
    r"|[A-Z][A-Za-z0-9]*"  # starts with a capital: URL, Flask
    r"|[#$][A-Za-z_][\w$]*)(?:\(\))?$"  # a sigil: #private, $var
)
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|pyi|js|mjs|cjs|jsx|ts|tsx|go|rs|java|kt|rb|c|h|cc|cpp|"
                   r"hpp|cs|php|swift|scala|lua|sh|md|rst|toml|cfg|ini|ya?ml|json))(?![\w/])")
#: A link to a file of a repository on a code host, as issues quote the code they mean
#: (``https://github.com/o/r/blob/<ref>/pylint/__init__.py#L99``): the path after the ref,
#: and the line of an ``#L`` anchor.
_LINK = re.compile(r"https?://(?:www\.)?(?:github\.com|gitlab\.com|bitbucket\.org)/[\w.-]+/[\w.-]+/(?:-/)?"
                   r"(?:blob|tree|src)/[^/\s]+/([^\s#?)\]\"'>`]+)(?:#L(\d+))?")
_EXCEPTION = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt))\b")
_WORDS = re.compile(r"\S+")


def query_identifiers(question: str) -> list[str]:
    """Code identifiers written in ``question``, in order, without repeats.

    A token counts when it is back-quoted, or looks like code: contains ``_``, a dot or
    ``::`` between names, an inner capital (``getValue``, ``HTTPServer``), ends ``()``, or is
    led by a sigil (``#fetch``, ``$config``: kept, as the definitions stage matches it).
    Plain capitalised words (``Flask``) are in :attr:`Query.capitalised` instead: they are
    code only where the symbol graph defines them."""
    found = [m.group(1).rstrip("()") for m in _BACKTICK.finditer(question)]
    for m in _TOKEN.finditer(question):
        tok = m.group(0)
        bare = tok[:-2] if tok.endswith("()") else tok
        if tok.endswith("()") or "_" in bare.strip("_") or any(s in bare for s in (".", "::", "#", "->")) \
                or _CAMEL_INNER.search(bare) or (bare.startswith("_") and len(bare) > 2) or SIGIL.match(bare):
            found.append(bare)
    cleaned = [f.strip(".,;:!?'\"") for f in found]
    return [f for f in dict.fromkeys(cleaned) if len(f) >= 3 and not _is_path(f)]


def _is_path(token: str) -> bool:
    """``utils.py`` / ``click.core.py``: a file name, not a dotted identifier."""
    return _PATH.fullmatch(token) is not None


def capitalised_words(question: str) -> list[str]:
    """Capitalised words that do not start a sentence (``Depends`` in "how is Depends
    resolved"), or the single word of a one-word question (``Flask``, ``g``: a one-word
    question that is exactly a defined name is a lookup); in order, without repeats."""
    text = question.strip()
    if " " not in text:
        bare = text.rstrip("()")
        return [bare] if bare.replace("_", "").isalnum() else []
    out: list[str] = []
    for m in _CAPITALISED.finditer(text):
        i = m.start() - 1
        while i >= 0 and text[i].isspace():
            i -= 1
        if i < 0 or text[i] in _SENTENCE_MARKS:
            continue  # "How ...", "Where ...": a capital because a sentence starts there
        out.append(m.group(1))
    return list(dict.fromkeys(w for w in out if len(w) >= 2))


@dataclass
class Query:
    """The analysed question; see the module docstring for each field."""

    text: str
    symbol_like: bool
    identifiers: list[str]
    capitalised: list[str]
    long: bool = False
    frames: list[Frame] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    links: list[tuple[str, int]] = field(default_factory=list)  # (path, line or 0) of code-host links to files
    dense_text: str = ""
    term_weights: dict[str, float] | None = None  # None: weight 1 per distinct term
    intent: str = ""  # the asker's own words (:func:`intent_text`); "" until analysed


def symbol_text(question: str) -> str:
    """The question as one token: stripped of spaces and of back quotes around it."""
    text = question.strip()
    if len(text) > 2 and text[0] == text[-1] == "`":
        text = text[1:-1].strip()
    return text


def is_symbol_query(question: str) -> bool:
    """True when the whole question is one code token, back-quoted or not (see the module
    docstring)."""
    return _SYMBOL_QUERY.match(symbol_text(question)) is not None


def is_long(question: str) -> bool:
    """A pasted text: more than ``LONG_WORDS`` words, or a traceback frame."""
    return _more_words_than(question, LONG_WORDS) or traces.has_frames(question)


def _more_words_than(text: str, n: int) -> bool:
    """More than ``n`` whitespace-separated words (stops counting there: a 500 KB log is not
    split whole just to say it is long)."""
    for i, _ in enumerate(_WORDS.finditer(text)):
        if i >= n:
            return True
    return False


def analyse(question: str, *, long_questions: bool = True) -> Query:
    """The :class:`Query` of ``question``; ``long_questions=False`` treats every question
    as short (the ``long-query`` stage switched off)."""
    q = Query(question, is_symbol_query(question), query_identifiers(question), capitalised_words(question))
    q.dense_text = question
    q.intent = intent_text(question)
    if not (long_questions and is_long(question)):
        return q
    q.long = True
    q.frames = traces.frames(question)
    q.links = list(dict.fromkeys((m.group(1).rstrip(".,;:"), int(m.group(2) or 0)) for m in _LINK.finditer(question)))
    q.paths = list(dict.fromkeys([*(f.path for f in q.frames), *(p for p, _ in q.links),
                                  *(m.group(1) for m in _PATH.finditer(question))]))
    q.exceptions = list(dict.fromkeys([*_raised(question), *_EXCEPTION.findall(question)]))
    # names in a traceback's frame and code lines are the call path, handled as frames; the
    # prose around it (and back-quoted names anywhere) says what the question is about
    # template boilerplate (headings, checklists, environment and version lines, HTML
    # comments) is in every issue of a project and says nothing about this one
    text = boilerplate.strip(question)
    prose = _without_frames(text)
    ticks = [m.group(1).rstrip("()") for m in _BACKTICK.finditer(text)]
    q.identifiers = list(dict.fromkeys([*ticks, *query_identifiers(prose)]))
    q.capitalised = [w for w in capitalised_words(prose) if w not in q.exceptions]
    q.dense_text = _digest(text, q)
    q.term_weights = _term_weights(text, q)
    return q


def _without_frames(question: str, keep_trace_start: bool = False) -> str:
    """``question`` minus traceback frame lines and the code line printed under each (and
    the ``Traceback (most recent call last):`` lines unless ``keep_trace_start``)."""
    out: list[str] = []
    skip_code = False
    for line in question.splitlines():
        if traces.is_frame_line(line):
            skip_code = 'File "' in line  # Python prints the frame's code line under it
            continue
        if skip_code and (line.startswith("    ") or not line.strip() or set(line.strip()) <= set("^~ ")):
            continue
        skip_code = False
        if keep_trace_start or not line.startswith("Traceback (most recent call last)"):
            out.append(line)
    return "\n".join(out)


_TEST_OUTPUT = re.compile(
    r"^\s*(?:(?:FAILED|ERROR|PASSED|XFAIL|XPASS|SKIPPED)\s+\S+::\S*.*"  # pytest's summary lines
    r"|=+ .* =+|_+ .* _+"  # its section rules
    r"|E\s{2,}.*"  # its assertion detail lines
    r"|\S+\.\w+:\d+:.*)$"  # path:line: locations (pytest, compilers, linters)
)
_LABEL = re.compile(r"^\s*(?:\S+\s+){0,3}\S+:\s*$")  # "test output:", "Log:": a label over pasted text
#: A test word in a fronted setting phrase ("In tests, ...", "During testing, ...") says where
#: something happens, not that tests are wanted.
_SETTING = re.compile(r"(?:^|(?<=[.!?;]\s)|(?<=\n))\s*(?:in|during|under|when|while|from)\s+"
                      r"(?:(?:the|my|our|a|some|unit|integration)\s+)*(?:tests?|testing|pytest|ci)\s*,", re.I)


def intent_text(question: str) -> str:
    """The asker's own words in ``question``: without fenced and back-quoted code, traceback
    frames with their code lines and the exception line that closes a trace, test-runner
    output (``FAILED tests/test_x.py::test_y``, ``path:line:`` locations), short labels over
    pasted text (``test output:``) and fronted setting phrases (``In tests, ...``).

    What a question asks for is in these words; pasted material is evidence. A traceback
    frame in ``tests/test_cli.py`` says the failing code was called from a test, not that the
    asker wants tests, and "In tests, X returns 1" places the problem; it does not ask for
    tests (the path-priors stage reads this)."""
    text = _FENCE.sub("\n", question)
    text = re.sub(r"`[^`\n]*`", " ", text)
    out: list[str] = []
    after_trace = False
    lines = _without_frames(text, keep_trace_start=True).splitlines()
    pasted = sum(1 for line in lines if line.strip()) > 1  # a one-line question is no label over a paste
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            after_trace = True
            continue
        if after_trace and line.strip():
            after_trace = False
            if not line[0].isspace():
                continue  # ``ValueError: ...`` closing the trace: the program's words
        if _TEST_OUTPUT.match(line) or (pasted and _LABEL.match(line)):
            continue
        out.append(line)
    return _SETTING.sub(" ", "\n".join(out)).strip()


def _raised(question: str) -> list[str]:
    """Exception names closing each traceback (``shop.rules.Invalid: 0`` -> ``Invalid``)."""
    out: list[str] = []
    in_trace = False
    for line in question.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_trace = True
        elif in_trace and line and not line[0].isspace():
            m = re.match(r"([A-Za-z_][\w.]*)(?::|$)", line)
            if m:
                out.append(m.group(1).rsplit(".", 1)[-1])
            in_trace = False
    return out


def _digest(question: str, q: Query) -> str:
    """What the dense side embeds for a long question: the title line, the exception lines,
    the code names and quoted code, then the text from its start, up to ``DENSE_CHARS``."""
    lines = [ln.strip() for ln in question.splitlines() if ln.strip()]
    title = lines[0] if lines else ""
    exc_lines = [ln for ln in lines if any(ln.startswith(e) or f"{e}:" in ln for e in q.exceptions)][-2:]
    code = [m.group(1).strip() for m in _FENCE.finditer(question)]
    funcs = [f.function for f in reversed(q.frames) if f.function and not f.function.startswith("<")]
    names = list(dict.fromkeys([*funcs[:10], *q.identifiers[:20], *q.exceptions]))
    parts = [title, *exc_lines, " ".join(names), *code, question]
    out: list[str] = []
    size = 0
    for part in dict.fromkeys(p for p in parts if p):
        if size >= DENSE_CHARS:
            break
        piece = part[: DENSE_CHARS - size]
        out.append(piece)
        size += len(piece) + 1
    return "\n".join(out)


def _term_weights(question: str, q: Query) -> dict[str, float]:
    """``1 + log(tf)`` per sparse term, times ``CODE_TERM_BOOST`` for terms of code names,
    paths and frames; the ``MAX_TERMS`` heaviest kept (ties by term, so it is stable)."""
    from gitrag.index import sparse  # ranking sits above sparse; imported here to keep query.py light

    counts = Counter(sparse.terms(question))
    funcs = [f.function for f in q.frames if f.function and not f.function.startswith("<")]
    code_text = " ".join([*funcs, *q.identifiers, *q.exceptions, *(p.replace("/", " ") for p in q.paths)])
    code_terms = set(sparse.terms(code_text))
    weights = {t: (1.0 + math.log(n)) * (CODE_TERM_BOOST if t in code_terms else 1.0) for t, n in counts.items()}
    kept = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_TERMS]
    return dict(kept)
