"""Written answers with checked citations, from an Ollama chat model.

    ranked results -> strength check (weak evidence: no model call, say so)
    -> numbered evidence "[n] path:start-end symbol" + line-numbered snippet, within a
       token budget (lowest-ranked dropped first, long snippets cut at a line)
    -> ollama.Client.chat(stream=True), the system prompt demanding path:start-end
       citations for every claim
    -> each streamed piece passes a :class:`CitationFilter` that removes citations
       pointing at nothing retrieved, so what is printed is already clean

Entry point: :func:`write_answer`. Library code: nothing here prints; streamed text goes
to the ``on_text`` callback. A chat failure never raises: it comes back as
``Answer.error`` (one line), because the ranked citations are the primary product.

Weak evidence (``evidence_strength``), measured on the fused/raw scores:

* ``hybrid`` (gitrag.query.ranking: ``w * dense + (1 - w) * sparse`` over min-max normalised
  list scores, w = 0.5, 0.3 for a one-token question, then boosts relative to the top):
  weak when the top score is below ``HYBRID_MIN`` = 0.75. A chunk first in both lists
  scores 1.0 before boosts; one that only one list found at most its list's weight (0.5,
  or 0.7 for the sparse list of a one-token question) plus the file coherence bonus
  (at most 0.2); a definition the question names gains 1.5-4.5x the top: weak means *no
  result was found well by both lists, nor defines a name the question uses*. A question
  without a single sparse term runs dense only, so it is judged by the dense rule.
* ``dense``: top cosine similarity below ``DENSE_MIN`` = 0.3.
* ``sparse``: top BM25 score below ``SPARSE_MIN`` = 2.0 (one rare term matched barely).
* any mode: the top ten scores are flat, ``(s1 - s10) / s1 < FLAT_SPREAD`` (2 %): no
  result stands out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from gitrag.errors import AnswerUnavailable as AnswerUnavailable  # defined there, named here too
from gitrag.errors import GitragError

if TYPE_CHECKING:
    from gitrag.config import Settings
    from gitrag.query.retrieval import Result

EVIDENCE_BUDGET = 3000  # tokens of evidence sent to the chat model
CHARS_PER_TOKEN = 3  # conservative for code (real tokenizers: ~3.5-4 chars per token)
MIN_ITEM_TOKENS = 100  # a truncated evidence item smaller than this is dropped instead
ANSWER_RESERVE = 1024  # tokens of context left for the answer (num_ctx)
HYBRID_MIN = 0.75
DENSE_MIN = 0.3
SPARSE_MIN = 2.0
FLAT_SPREAD = 0.02
HOLD_BRACKET = 400  # characters an open "(" or "[" may hold back streamed text

SYSTEM_PROMPT = """You answer questions about a code repository. You get the question and \
numbered evidence: excerpts of the repository, each headed by its location as \
path:start-end, with line numbers in the left margin.

Rules:
- Use only the evidence. Every claim cites the evidence it rests on as path:start-end, \
for example `{example}`, using the paths and line numbers shown; cite the narrowest range \
that supports the claim.
- Never cite an evidence number such as [1], a path that is not in the evidence, or lines \
outside the excerpts.
- If the evidence does not answer the question, say so in one sentence instead of guessing.
- Be concise: a short paragraph or a few bullet points, plain text or Markdown."""


def count_tokens(text: str) -> int:
    """A conservative token estimate: one token per ``CHARS_PER_TOKEN`` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# -- evidence strength ---------------------------------------------------------------------


@dataclass(frozen=True)
class Strength:
    """Whether the results are good enough to answer from; ``reason`` says why not."""

    weak: bool
    reason: str
    top_score: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def evidence_strength(results: list[Result], mode: str, question: str | None = None) -> Strength:
    """Apply the weak-evidence rule of ``mode`` (see the module docstring) to ranked results
    for ``question`` (needed to tell a termless hybrid question, which ran dense only)."""
    if not results:
        return Strength(True, "no results", None)
    top = results[0].score
    from gitrag.index import sparse  # here, not at the top: the daemon route of `ask` imports this module

    if mode == "hybrid" and question is not None and not sparse.query_vector(question).indices:
        mode = "dense"
    floors = {"hybrid": (HYBRID_MIN, "no result was found by two of the dense, sparse and definition searches"),
              "dense": (DENSE_MIN, "best similarity is low"), "sparse": (SPARSE_MIN, "best term match is weak")}
    floor, why = floors.get(mode, floors["hybrid"])
    if top < floor:
        return Strength(True, f"{why}: top score {top:.4g} < {floor:.4g}", top)
    tenth = results[min(9, len(results) - 1)].score
    if len(results) >= 5 and top > 0 and (top - tenth) / top < FLAT_SPREAD:
        return Strength(True, f"the top results score alike ({top:.4g} vs {tenth:.4g}): none stands out", top)
    return Strength(False, "", top)


def weak_message(question: str, strength: Strength) -> str:
    """The one line said instead of an answer when the evidence is weak."""
    return f"the index has no strong match for {question!r} ({strength.reason}); the closest locations follow"


# -- evidence ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Evidence:
    """One numbered excerpt sent to the model. Lines are those shown (1-based, inclusive)."""

    n: int
    path: str
    start_line: int
    end_line: int
    symbol: str
    language: str
    body: str  # line-numbered source as sent
    tokens: int  # estimate for the header and body together
    truncated: bool

    @property
    def header(self) -> str:
        return f"[{self.n}] {self.path}:{self.start_line}-{self.end_line} {self.symbol}".rstrip()

    def render(self) -> str:
        return f"{self.header}\n```{self.language}\n{self.body}\n```"

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "path": self.path, "start_line": self.start_line, "end_line": self.end_line,
                "symbol": self.symbol, "tokens": self.tokens, "truncated": self.truncated}


def _numbered(snippet: str, start_line: int) -> list[str]:
    lines = snippet.splitlines() or [""]
    width = len(str(start_line + len(lines) - 1))
    return [f"{start_line + i:>{width}}| {line}" for i, line in enumerate(lines)]


def _fit(result: Result, n: int, limit: int) -> Evidence | None:
    """``result`` as evidence item ``n`` within ``limit`` tokens, cut at a line; None if < 1 line fits."""
    lines = _numbered(result.snippet, result.start_line)
    probe = Evidence(n, result.path, result.start_line, result.end_line, result.symbol, result.language, "", 0, False)
    overhead = count_tokens(probe.render())
    kept: list[str] = []
    used = overhead
    for line in lines:
        cost = count_tokens(line + "\n")
        if used + cost > limit:
            break
        kept.append(line)
        used += cost
    if not kept:
        return None
    truncated = len(kept) < len(lines)
    end = result.start_line + len(kept) - 1 if truncated else result.end_line
    body = "\n".join(kept)
    ev = Evidence(n, result.path, result.start_line, end, result.symbol, result.language, body, 0, truncated)
    return Evidence(**{**asdict(ev), "tokens": count_tokens(ev.render())})


def select_evidence(results: list[Result], budget: int = EVIDENCE_BUDGET) -> list[Evidence]:
    """Number results in rank order and keep as many as fit ``budget`` tokens.

    One item may take at most a third of the budget (the first item: half), longer
    snippets are cut at a line; when the rest of the budget is below ``MIN_ITEM_TOKENS``
    the remaining (lowest-ranked) results are dropped."""
    out: list[Evidence] = []
    left = budget
    for r in results:
        cap = budget // 2 if not out else budget // 3
        limit = min(cap, left)
        if limit < MIN_ITEM_TOKENS and out:
            break
        ev = _fit(r, len(out) + 1, limit)
        if ev is None:
            continue
        out.append(ev)
        left -= ev.tokens
    return out


def build_messages(question: str, evidence: list[Evidence]) -> list[dict[str, str]]:
    """The chat messages: system rules, then the question with its evidence."""
    example = f"{evidence[0].path}:{evidence[0].start_line}-{evidence[0].end_line}" if evidence else "src/app.py:10-24"
    body = "\n\n".join(ev.render() for ev in evidence)
    user = f"Question: {question}\n\nEvidence:\n\n{body}\n\nAnswer the question, citing path:start-end for every claim."
    return [{"role": "system", "content": SYSTEM_PROMPT.format(example=example)}, {"role": "user", "content": user}]


# -- citations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """A ``path:start-end`` found in the answer; ``text`` as written."""

    text: str
    path: str
    start_line: int
    end_line: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_GENERIC_PATH = r"(?:[\w.+@-]+/)*[\w+@-][\w.+@-]*\.[A-Za-z]\w*"
_LINES = r"[:#]L?(?P<start>\d+)(?:[-–]L?(?P<end>\d+))?(?!\d)"
_SEP = re.compile(r"^(?:\s|[,;]|\band\b|`)*$")


class CitationFilter:
    """Removes citations that point at nothing retrieved from streamed answer text.

    A citation is ``path:start-end`` or ``path:line`` (also ``path#L3-L9``), optionally in
    backticks. It is kept when ``path`` is a retrieved result's path and the range overlaps
    that result's lines; otherwise it is removed with the whitespace before it, and a
    bracket group left empty (``(a.py:1-2)``, ``[x.py:3]``) goes with it. Tokens that are
    not path-like (``localhost:8080``, ``10:30``) are left alone.

    ``feed`` returns the text that is safe to print now: it holds back the last partial
    word and any ``(``/``[`` group still open (up to ``HOLD_BRACKET`` characters).
    ``finish`` returns the rest. The concatenation of the returns is the final answer.
    """

    def __init__(self, results: Iterable[Result]) -> None:
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        for r in results:
            self.ranges.setdefault(r.path, []).append((r.start_line, r.end_line))
        known = "|".join(re.escape(p) for p in sorted(self.ranges, key=len, reverse=True))
        path = f"(?:{known}|{_GENERIC_PATH})" if known else _GENERIC_PATH
        self._cite = re.compile(rf"(?<![\w/.@:-])`?(?P<path>{path}){_LINES}`?")
        group = rf"[ \t]*(?P<open>[\[(])(?P<inner>[^\[\]()\n]{{1,{HOLD_BRACKET}}})(?P<close>[\])])"
        self._group = re.compile(group)
        self._any = re.compile(rf"(?P<group>{group})|[ \t]*{self._cite.pattern}")  # groups first, in text order
        self.kept: list[Citation] = []
        self.dropped: list[Citation] = []
        self._buf = ""

    # -- streaming ---------------------------------------------------------------------
    def feed(self, piece: str) -> str:
        self._buf += piece
        cut = self._safe_cut(self._buf)
        seg, self._buf = self._buf[:cut], self._buf[cut:]
        return self.clean(seg)

    def finish(self) -> str:
        seg, self._buf = self._buf, ""
        return self.clean(seg)

    def _safe_cut(self, buf: str) -> int:
        """Where to split ``buf``: before its trailing whitespace + partial word, and
        never inside a bracket group (closed later or not) that began within reach."""
        cut = re.search(r"\s*\S*\s*\Z", buf).start()  # type: ignore[union-attr]  # matches every string (at least at its end)
        stack: list[int] = []
        for i, ch in enumerate(buf[:cut]):
            if ch in "([":
                stack.append(i)
            elif ch in ")]" and stack:
                stack.pop()
        reachable = [i for i in stack if len(buf) - i <= HOLD_BRACKET]
        if reachable:
            cut = reachable[0]
            while cut > 0 and buf[cut - 1] in " \t":
                cut -= 1
        return cut

    # -- cleaning ------------------------------------------------------------------------
    def clean(self, text: str) -> str:
        """``text`` without invalid citations; records kept and dropped ones."""
        return self._any.sub(self._clean_match, text)

    def _clean_match(self, m: re.Match[str]) -> str:
        if m.group("group") is None:
            return m.group() if self._judge(m) else ""
        inner = self._group.fullmatch(m.group())
        assert inner is not None
        return self._clean_group(inner)

    def _clean_group(self, m: re.Match[str]) -> str:
        inner = m.group("inner")
        cites = list(self._cite.finditer(inner))
        if not cites:
            return m.group()
        rest = self._cite.sub("", inner)
        if not _SEP.match(rest):  # prose with citations inside: judge each on its own
            lead = m.group()[: m.start("inner") - m.start()]
            return lead + self._any.sub(self._clean_match, inner) + m.group("close")
        keep = [c.group() for c in cites if self._judge(c)]
        if not keep:
            return ""
        lead = m.group()[: m.start("open") - m.start()]
        return f"{lead}{m.group('open')}{', '.join(keep)}{m.group('close')}"

    def _judge(self, m: re.Match[str]) -> bool:
        path = m.group("path")
        start = int(m.group("start"))
        end = int(m.group("end") or start)
        start, end = min(start, end), max(start, end)
        cite = Citation(m.group().strip().strip("`"), path, start, end)
        ok = any(s <= end and start <= e for s, e in self.ranges.get(path, []))
        bucket = self.kept if ok else self.dropped
        if cite not in bucket:
            bucket.append(cite)
        return ok


def check_citations(text: str, results: Iterable[Result]) -> tuple[str, list[Citation], list[Citation]]:
    """``(clean text, kept, dropped)`` for a whole answer at once (same rules as streaming)."""
    f = CitationFilter(results)
    clean = f.clean(text)
    return clean, f.kept, f.dropped


# -- the model call ----------------------------------------------------------------------------


def stream_chat(settings: Settings, messages: list[dict[str, str]], on_piece: Callable[[str], None]) -> None:
    """Stream the reply of ``settings.chat_model`` piece by piece to ``on_piece``.

    Raises AnswerUnavailable (one line: what failed, what to do) on any failure."""
    import httpx
    import ollama

    from gitrag.index.embedders import ollamahost

    model = settings.chat_model
    try:  # read as the embedder reads it: OLLAMA_HOST's forms, no proxy for a local server
        host = ollamahost.parse_host(settings.ollama_host)
    except GitragError as exc:
        raise AnswerUnavailable(str(exc)) from None
    prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
    num_ctx = max(4096, 1024 * math.ceil((prompt_tokens + ANSWER_RESERVE) / 1024))
    client = ollamahost.client(host, settings.ollama_timeout)
    try:
        stream = client.chat(model=model, messages=messages, stream=True,
                             options={"temperature": 0.1, "num_ctx": num_ctx})
        for part in stream:
            piece = part.message.content or ""
            if piece:
                on_piece(piece)
    except ollama.ResponseError as exc:
        if exc.status_code == 404 and "model" in str(exc.error).lower():  # Ollama's: model "m" not found
            raise AnswerUnavailable(
                f"chat model {model!r} is not on the Ollama server at {host}; run `ollama pull {model}`"
            ) from None
        if exc.status_code == 404:  # another server (or a proxy) on that address
            raise AnswerUnavailable(f"Ollama at {host} answered the chat with HTTP 404 and no Ollama error "
                                    f"({_one_line(exc.error) or 'an empty body'}); is ollama_host an Ollama server?"
                                    ) from None
        raise AnswerUnavailable(f"the chat model {model!r} failed at {host}: {_one_line(exc.error)}") from None
    except (ConnectionError, httpx.ConnectError):
        raise AnswerUnavailable(
            f"cannot reach Ollama at {host} for the chat model; start it with `ollama serve` or set GITRAG_OLLAMA_HOST"
        ) from None
    except httpx.TimeoutException:
        raise AnswerUnavailable(
            f"the chat model {model!r} at {host} did not answer within {settings.ollama_timeout:g} s; "
            f"raise GITRAG_OLLAMA_TIMEOUT or use a smaller model"
        ) from None
    except (httpx.HTTPError, ValueError) as exc:
        raise AnswerUnavailable(f"the chat with {model!r} at {host} broke off: {_one_line(str(exc))}") from None
    finally:
        close = getattr(client, "close", None)  # ollama >= 0.5
        if close is not None:
            close()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:200]


# -- the whole answer ----------------------------------------------------------------------------


@dataclass
class Answer:
    """What :func:`write_answer` produced; ``to_json`` gives the extra ``ask --json`` fields.

    ``text``: the answer with invalid citations removed, or None (no model, weak evidence,
    or the model failed before saying anything). ``error``: one line when the model failed.
    """

    model: str = ""
    text: str | None = None
    error: str | None = None
    strength: Strength | None = None
    evidence: list[Evidence] = field(default_factory=list)
    kept: list[Citation] = field(default_factory=list)
    dropped: list[Citation] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.text, "answer_error": self.error, "chat_model": self.model or None,
            "evidence_strength": self.strength.to_json() if self.strength else None,
            "evidence": [e.to_json() for e in self.evidence],
            "citations": {"kept": [c.to_json() for c in self.kept], "dropped": [c.to_json() for c in self.dropped]},
        }


def write_answer(
    settings: Settings,
    question: str,
    results: list[Result],
    mode: str,
    on_text: Callable[[str], None] | None = None,
    budget: int = EVIDENCE_BUDGET,
) -> Answer:
    """Answer ``question`` from ``results`` with ``settings.chat_model``; never raises for
    chat failures (see ``Answer.error``). ``on_text`` receives the cleaned answer as it
    streams. With weak evidence the model is not called (``strength.weak``)."""
    out = Answer(model=settings.chat_model, strength=evidence_strength(results, mode, question))
    if out.strength is not None and out.strength.weak:
        return out
    out.evidence = select_evidence(results, budget)
    filt = CitationFilter(results)
    parts: list[str] = []

    def emit(text: str) -> None:
        if text:
            parts.append(text)
            if on_text is not None:
                on_text(text)

    try:
        stream_chat(settings, build_messages(question, out.evidence), lambda piece: emit(filt.feed(piece)))
    except AnswerUnavailable as exc:
        out.error = str(exc)
    emit(filt.finish())
    text = "".join(parts).strip()
    out.text = text or None
    out.kept, out.dropped = filt.kept, filt.dropped
    return out
