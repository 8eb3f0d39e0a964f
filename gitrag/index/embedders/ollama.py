"""``ollama``: embeddings from an Ollama server through the official ``ollama`` client.

One ``/api/embed`` request per ``batch_size`` inputs. Models that expect instruction
prefixes get them (``MODEL_PREFIXES``); the prefixes are part of the fingerprint.
``dim`` is learnt by embedding a probe, ``max_tokens`` from ``/api/show`` (the smaller
of the model's trained ``<arch>.context_length`` and its ``num_ctx`` parameter, 2048
when neither is reported); both are fetched on first access and kept.

Token counts are *estimates*: Ollama has no tokenize endpoint. ``count_tokens`` counts
like a WordPiece/BPE tokenizer would at worst on code: one token per punctuation
character, digit and non-ASCII byte, one per three letters of a word, plus prefix and
two special tokens. On 20,000 slices of real Python/C/JS (1,200 characters) against
BERT's tokenizer it overcounts by a median 1.27x and undercounts 1.6% of slices (never
below 0.73x). An undercounted input is truncated by Ollama, never rejected.

Faults (see ``embed_documents_partial`` for the per-input contract):

* a host that is not an http(s) URL with a port in 1-65535 -> ConfigError at once
  (:func:`gitrag.index.embedders.ollamahost.parse_host`; written as Ollama's ``OLLAMA_HOST`` is: ``host``, ``host:port``,
  ``:port`` or a URL)
* server not running -> EmbedderUnavailable (start it with ``ollama serve``)
* an answer that is not Ollama's JSON (another server on that port) -> EmbedderUnavailable
* model not pulled (404 with Ollama's ``model ... not found``) -> EmbedderUnavailable (run
  ``ollama pull MODEL``); a 404 without it (another server, a proxy) -> EmbedderUnavailable
  asking whether ollama_host is an Ollama server
* a server error (5xx) on the first embed request -> EmbedderUnavailable naming the status
  (the model is not blamed: "cannot embed" is for a 4xx refusal of the probe)
* dropped connection / 429 / 502-504 -> up to ``retries`` retries with backoff, then
  EmbedderUnavailable; a timeout is retried once. Connecting may take ``CONNECT_S``
  seconds, an answer ``timeout`` seconds, and the first try after ``keep_alive_s`` idle
  (the model is loading) ``cold_factor`` times that; every request asks Ollama to keep
  the model loaded for ``keep_alive_s``. A request without an answer after
  ``notice_s`` (5 s, or a quarter of the timeout) logs one "waiting for Ollama" line.
  With the defaults a server that never answers fails after about 90 s.
* input too long (400) -> the batch is bisected; the lone input is shortened (its head
  kept, like the local model's truncation) and retried
* any other rejected batch, fewer vectors than inputs -> bisected to the inputs at fault
* NaN/inf/zero vector -> that input alone is retried once, then reported as failed
* wrong dimension -> EmbedderError (the model changed under the index: ``gitrag index --rebuild``)
"""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from gitrag.errors import EmbedderError, EmbedderUnavailable
from gitrag.index.embedders.base import make_fingerprint
from gitrag.index.embedders.ollamahost import CONNECT_S, DEFAULT_PORT, parse_host  # noqa: F401 - re-exported: the embedder's public names
from gitrag.index.embedders.ollamahost import client as ollama_client

if TYPE_CHECKING:
    from gitrag.config import Settings

log = structlog.get_logger("gitrag.index.embedders.ollama")

# base model name (no namespace, no tag) -> (query prefix, document prefix)
MODEL_PREFIXES: dict[str, tuple[str, str]] = {
    "nomic-embed-text": ("search_query: ", "search_document: "),
    "nomic-embed-text-v2-moe": ("search_query: ", "search_document: "),
    "mxbai-embed-large": ("Represent this sentence for searching relevant passages: ", ""),
}
DEFAULT_CONTEXT = 2048
KEEP_ALIVE_S = 15 * 60
NOTICE_S = 5.0  # say that gitrag is waiting once a request has had no answer for this long
_TRANSIENT_STATUS = {408, 429, 502, 503, 504}
_TOO_LONG = re.compile(r"context length|input length|too long|exceeds", re.I)
_SHRINK = 0.7  # a too-long input is retried with its first 70%, 49%, ... of characters
_MIN_KEEP = 64
_PIECES = re.compile(r"[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")


def model_prefixes(model: str) -> tuple[str, str]:
    """(query prefix, document prefix) that ``model`` was trained with; empty if none."""
    return MODEL_PREFIXES.get(base_model_name(model), ("", ""))


def base_model_name(model: str) -> str:
    """``'me/nomic-embed-text:v1.5'`` -> ``'nomic-embed-text'``."""
    return model.rsplit("/", 1)[-1].split(":", 1)[0].lower()


def canonical_model(model: str) -> str:
    """Ollama's own spelling: a missing tag means ``:latest``."""
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def estimate_tokens(text: str) -> int:
    """Conservative token count of ``text`` without a tokenizer (see module docstring)."""
    n = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and first.isalpha():
            n += math.ceil(len(piece) / 3)
        elif first.isdigit():
            n += len(piece)
        else:
            n += 1 if first.isascii() else len(piece.encode("utf-8", "surrogatepass"))
    return n


def _one_line(text: object) -> str:
    return " ".join(str(text).split())[:120]


class _Rejected(Exception):
    """The server refused these inputs (not the server's health): isolate the culprit.
    ``status``: the HTTP status (0 when the answer was wrong, not refused)."""

    def __init__(self, message: str, too_long: bool = False, status: int = 0) -> None:
        super().__init__(message)
        self.too_long = too_long
        self.status = status


@dataclass
class _Batch:
    """The inputs of one embed call and the results filled in so far (``ok[i]``: row i is set)."""

    texts: list[str]
    out: np.ndarray
    ok: np.ndarray


class OllamaEmbedder:
    """Vectors from an Ollama model, L2-normalised float32.

    ``dim`` and ``max_tokens`` are discovered from the server on first access (which may
    raise EmbedderUnavailable). ``retry_delays`` are the sleeps (s) before each retry of a
    transient failure; their count is the number of retries.
    """

    name = "ollama"

    def __init__(
        self,
        host: str = "http://127.0.0.1:11434",
        model: str = "nomic-embed-text",
        timeout: float = 30.0,
        batch_size: int = 32,
        retry_delays: tuple[float, ...] = (1.0, 5.0),
        cold_factor: float = 2.0,
        keep_alive_s: float = KEEP_ALIVE_S,
    ) -> None:
        self.host = parse_host(host)
        self.model = model
        self.timeout = float(timeout)
        self.notice_s = min(NOTICE_S, self.timeout / 4)
        self.batch_size = max(1, int(batch_size))
        self.retry_delays = tuple(retry_delays)
        self.cold_factor = cold_factor
        self.keep_alive_s = keep_alive_s
        self.query_prefix, self.document_prefix = model_prefixes(model)
        self._dim: int | None = None
        self._max_tokens: int | None = None
        self._clients: dict[bool, Any] = {}
        self._last_ok = -math.inf
        self._lock = threading.Lock()

    # -- discovered properties ----------------------------------------------------

    @property
    def dim(self) -> int:
        """Vector length, learnt by embedding a probe on first access."""
        if self._dim is None:
            with self._lock:
                if self._dim is None:
                    self._dim = self._probe_dim()
        return self._dim

    @property
    def max_tokens(self) -> int:
        """Context length of the model in its tokens, from ``/api/show``."""
        if self._max_tokens is None:
            with self._lock:
                if self._max_tokens is None:
                    self._max_tokens = self._context_length()
        return self._max_tokens

    @property
    def fingerprint(self) -> str:
        return make_fingerprint(
            kind="ollama",
            model=canonical_model(self.model),
            dim=self.dim,
            query_prefix=self.query_prefix,
            document_prefix=self.document_prefix,
            normalize=True,
        )

    def count_tokens(self, text: str) -> int:
        """Estimated length of document prefix + ``text`` in model tokens (+2 special)."""
        return estimate_tokens(self.document_prefix) + estimate_tokens(text) + 2

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        """``count_tokens`` of each text, same order."""
        return [self.count_tokens(t) for t in texts]

    # -- the client ---------------------------------------------------------------------

    def _client(self, cold: bool) -> Any:
        client = self._clients.get(cold)
        if client is None:
            try:
                client = ollama_client(self.host, self.timeout * (self.cold_factor if cold else 1.0))
            except ImportError:
                raise EmbedderUnavailable("the ollama embedder needs the ollama package: pip install ollama") from None
            self._clients[cold] = client
        return client

    def _is_cold(self) -> bool:
        return time.monotonic() - self._last_ok > self.keep_alive_s

    def _call(self, what: str, fn: Any) -> Any:
        """Runs ``fn(client)`` with retries of transient faults; maps errors to ours.

        Raises EmbedderUnavailable (unreachable, model missing, retries exhausted) or
        _Rejected (the server refused this request's content)."""
        import httpx
        from ollama import ResponseError

        attempts = len(self.retry_delays) + 1
        last = ""
        timeouts = 0
        for attempt in range(attempts):
            if attempt:
                time.sleep(self.retry_delays[attempt - 1])
            cold = attempt == 0 and self._is_cold()
            notice = threading.Timer(self.notice_s, self._waiting, (what, cold))
            notice.daemon = True
            notice.start()
            try:
                result = fn(self._client(cold))
            except ConnectionError:
                raise self._unreachable("connection refused") from None
            except ResponseError as exc:
                if exc.status_code == 404 and "model" in str(exc.error).lower():  # Ollama's: model "m" not found
                    raise self._not_pulled(exc.error) from None
                if exc.status_code == 404:  # another server (or a proxy) on that address
                    raise EmbedderUnavailable(
                        f"Ollama at {self.host} answered {what} with HTTP 404 and no Ollama error "
                        f"({_one_line(exc.error) or 'an empty body'}); is ollama_host an Ollama server?"
                    ) from None
                if exc.status_code not in _TRANSIENT_STATUS:
                    too_long = exc.status_code == 400 and bool(_TOO_LONG.search(str(exc.error)))
                    raise _Rejected(str(exc.error), too_long=too_long, status=exc.status_code) from None
                last = f"HTTP {exc.status_code}: {exc.error}"
            except httpx.TimeoutException:
                timeouts += 1
                last = "timed out"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            except ValueError as exc:  # not JSON, or JSON of another shape: not an Ollama server
                raise EmbedderUnavailable(
                    f"Ollama at {self.host} answered {what} with something that is not Ollama's JSON "
                    f"({type(exc).__name__}: {str(exc)[:80]}); is ollama_host an Ollama server?"
                ) from None
            else:
                self._last_ok = time.monotonic()
                return result
            finally:
                notice.cancel()
            log.warning("ollama request failed", what=what, error=last, attempt=attempt + 1, attempts=attempts)
            if timeouts > 1:  # it hangs: a third wait would only make the user wait longer
                break
        if last == "timed out":
            raise EmbedderUnavailable(
                f"Ollama at {self.host} timed out: no answer to {what} within {self.timeout:g} s "
                f"({timeouts} tries); check `ollama ps` and the server log, or raise ollama_timeout"
            )
        raise EmbedderUnavailable(
            f"Ollama at {self.host} failed {attempts} times on {what} ({last}); "
            "check `ollama ps` and the server log, or raise ollama_timeout"
        )

    def _waiting(self, what: str, cold: bool) -> None:
        limit = self.timeout * (self.cold_factor if cold else 1.0)
        log.warning(f"waiting for Ollama at {self.host}: no answer to {what} after {self.notice_s:g} s "
                    f"(gives up after {limit:g} s; ollama_timeout)" + (" - the model may be loading" if cold else ""))

    def _unreachable(self, why: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(
            f"cannot reach Ollama at {self.host}: {why}; start it with `ollama serve` or set ollama_host"
        )

    def _not_pulled(self, why: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(f"Ollama at {self.host} has no model {self.model!r} ({why}); run `ollama pull {self.model}`")

    # -- discovery ------------------------------------------------------------------------

    def _context_length(self) -> int:
        try:
            info = self._call("show", lambda c: c.show(self.model))
        except _Rejected as exc:
            raise EmbedderUnavailable(f"Ollama cannot describe model {self.model!r}: {exc}") from None
        caps = info.capabilities
        if caps and "embedding" not in caps:
            raise EmbedderUnavailable(
                f"Ollama model {self.model!r} cannot embed (capabilities: {', '.join(caps)}); "
                "use an embedding model, e.g. `ollama pull nomic-embed-text`"
            )
        return context_length(dict(info.modelinfo or {}), info.parameters or "")

    def _probe_dim(self) -> int:
        vectors = self._embed_request([self.document_prefix + "dimension probe"], probe=True)
        return int(vectors.shape[1])

    # -- embedding ------------------------------------------------------------------------

    def _embed_request(self, inputs: list[str], probe: bool = False) -> np.ndarray:
        """One ``/api/embed`` call: float32 (len(inputs), dim), rows as returned (raw).

        Raises _Rejected when the server refuses the content or answers with the wrong
        number of vectors, EmbedderError on a dimension change."""
        try:
            response = self._call(
                "embed",
                lambda c: c.embed(model=self.model, input=inputs, truncate=True, keep_alive=f"{int(self.keep_alive_s)}s"),
            )
        except _Rejected as exc:
            if probe and exc.status >= 500:  # the server failed, not the model: say so
                raise EmbedderUnavailable(
                    f"Ollama at {self.host} failed on the first embed request for model {self.model!r} "
                    f"(HTTP {exc.status}: {exc}); check the server log (`ollama ps`, `journalctl -u ollama`)"
                ) from None
            if probe:
                raise EmbedderUnavailable(f"Ollama model {self.model!r} cannot embed: {exc}; use an embedding model") from None
            raise
        rows = list(response.embeddings or [])
        if len(rows) != len(inputs):
            raise _Rejected(f"{len(rows)} vectors for {len(inputs)} inputs")
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)
        if self._dim is not None and vectors.shape[1] != self._dim:
            raise EmbedderError(
                f"Ollama model {self.model!r} returned {vectors.shape[1]}-dim vectors, expected {self._dim}; "
                "the model changed: re-embed everything with `gitrag index --rebuild`"
            )
        return vectors

    def embed_documents_partial(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Embed what can be embedded; report the rest.

        Returns ``(vectors, failed)``: ``vectors`` is float32 (len(texts), dim) in input
        order, unit rows, except that the row of each failed input is all zeros;
        ``failed`` is the sorted list of those indices (each logged with its reason).
        Raises EmbedderUnavailable / EmbedderError when the server or model fails as a
        whole (nothing is returned then)."""
        dim = self.dim
        docs = [self.document_prefix + t for t in texts]
        batch = _Batch(docs, np.zeros((len(docs), dim), dtype=np.float32), np.zeros(len(docs), dtype=bool))
        for start in range(0, len(docs), self.batch_size):
            self._embed_span(batch, list(range(start, min(start + self.batch_size, len(docs)))))
        failed = [int(i) for i in np.flatnonzero(~batch.ok)]
        return batch.out, failed

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Returns float32 (len(texts), dim), unit rows, in input order.

        Raises EmbedderUnavailable when Ollama or the model is unusable and EmbedderError
        naming the failed indices when any single input could not be embedded (use
        ``embed_documents_partial`` to keep the others)."""
        vectors, failed = self.embed_documents_partial(texts)
        if failed:
            raise EmbedderError(
                f"Ollama model {self.model!r} could not embed {len(failed)} of {len(texts)} input(s) "
                f"(indices {failed[:20]}); see the log for each reason"
            )
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Returns float32 (dim,), unit length, embedded with the model's query prefix."""
        _ = self.dim
        batch = _Batch([self.query_prefix + text], np.zeros((1, self.dim), dtype=np.float32), np.zeros(1, dtype=bool))
        self._embed_span(batch, [0])
        if not batch.ok[0]:
            raise EmbedderError(f"Ollama model {self.model!r} could not embed the query; see the log")
        return batch.out[0]

    def _embed_span(self, batch: _Batch, idx: list[int]) -> None:
        """Embeds ``batch.texts[idx]`` into ``batch.out``, bisecting around rejected inputs."""
        try:
            vectors = self._embed_request([batch.texts[i] for i in idx])
        except _Rejected as exc:
            if len(idx) > 1:
                mid = len(idx) // 2
                self._embed_span(batch, idx[:mid])
                self._embed_span(batch, idx[mid:])
            else:
                self._embed_alone(batch, idx[0], exc)
            return
        bad = []
        for row, i in zip(vectors, idx):
            if _usable(row):
                batch.out[i], batch.ok[i] = row / np.linalg.norm(row), True
            else:
                bad.append(i)
        for i in bad:
            if len(idx) > 1:
                self._embed_span(batch, [i])  # NaN in a batch: retried once on its own
            else:
                log.warning("ollama input skipped", index=i, reason="NaN, infinite or zero vector")

    def _embed_alone(self, batch: _Batch, i: int, exc: _Rejected) -> None:
        """One input the server refused: shorten it if too long, else report it failed."""
        if exc.too_long:
            self._embed_shortened(batch, i)
            return
        self._check_server_healthy(str(exc))
        log.warning("ollama input skipped", index=i, reason=str(exc))

    def _embed_shortened(self, batch: _Batch, i: int) -> None:
        text = batch.texts[i]
        keep = len(text)
        while keep > _MIN_KEEP:
            keep = int(keep * _SHRINK)
            try:
                vectors = self._embed_request([text[:keep]])
            except _Rejected as exc:
                if exc.too_long:
                    continue
                log.warning("ollama input skipped", index=i, reason=str(exc))
                return
            if _usable(vectors[0]):
                log.warning("ollama input too long; embedded its head", index=i, chars=keep, of=len(text))
                batch.out[i], batch.ok[i] = vectors[0] / np.linalg.norm(vectors[0]), True
            return
        log.warning("ollama input skipped", index=i, reason=f"too long even when cut to {keep} characters")

    def _check_server_healthy(self, why: str) -> None:
        """Raises EmbedderUnavailable if a trivial input fails too: the fault is the server's."""
        try:
            self._embed_request([self.document_prefix + "ok"])
        except _Rejected:
            raise EmbedderUnavailable(
                f"Ollama at {self.host} rejects every input for model {self.model!r} ({why}); check the server log"
            ) from None


def _usable(row: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(row))) and float(np.linalg.norm(row)) > 0.0


def context_length(model_info: dict[str, Any], parameters: str) -> int:
    """Tokens the model takes: min(``<arch>.context_length``, ``num_ctx``), else 2048."""
    arch = model_info.get("general.architecture")
    values = [v for k, v in model_info.items() if k == f"{arch}.context_length" or (arch is None and k.endswith(".context_length"))]
    match = re.search(r"^\s*num_ctx\s+(\d+)", parameters, re.M)
    if match:
        values.append(int(match.group(1)))
    values = [int(v) for v in values if isinstance(v, (int, float)) and v > 0]
    return min(values) if values else DEFAULT_CONTEXT


def factory(settings: Settings) -> OllamaEmbedder:
    return OllamaEmbedder(
        host=settings.ollama_host,
        model=settings.ollama_model,
        timeout=settings.ollama_timeout,
        batch_size=settings.batch_size,
    )
