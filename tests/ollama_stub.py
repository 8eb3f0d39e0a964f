"""A stand-in Ollama server for tests: real JSON shapes, scriptable faults, no model.

    with OllamaStub() as stub:
        client = ollama.Client(host=stub.url)
        stub.poison = "BAD"            # any /api/embed batch containing "BAD" -> 500
        ...
        assert stub.requests[-1].body["input"] == [...]

Endpoints (shapes as in Ollama's docs/api.md and ollama-python's types):
``POST /api/embed``, ``POST /api/show``, ``GET /api/tags``, ``GET /api/version``,
``POST /api/chat`` (NDJSON stream by default, one object with ``"stream": false``).

Vectors are deterministic: feature hashing of words and trigrams (gitrag's ``hash``
embedder, widened to the model's dimension), so similar texts are close and every run
gives the same numbers. Behaviour attributes may be changed while the server runs;
``None`` or ``0`` switches a fault off. Bound to 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gitrag.index.embedders.hashing import HashEmbedder

TOO_LONG_ERROR = "the input length exceeds the context length"
VERSION = "0.6.8"


@dataclass(frozen=True)
class StubModel:
    """What ``/api/show`` reports for a model. ``num_ctx`` None: no such parameter."""

    arch: str
    dim: int
    context_length: int
    num_ctx: int | None = None
    capabilities: tuple[str, ...] = ("embedding",)
    family: str = "bert"
    parameter_size: str = "137M"


DEFAULT_MODELS: dict[str, StubModel] = {
    "nomic-embed-text:latest": StubModel("nomic-bert", 768, 2048, num_ctx=8192, family="nomic-bert"),
    "mxbai-embed-large:latest": StubModel("bert", 1024, 512, parameter_size="334M"),
    "all-minilm:latest": StubModel("bert", 384, 512, parameter_size="23M"),
    "llama3.2:latest": StubModel(
        "llama", 3072, 131072, capabilities=("completion", "tools"), family="llama", parameter_size="3.2B"
    ),
}


@dataclass
class StubRequest:
    """One request as received: method, path, decoded JSON body (None for GET)."""

    method: str
    path: str
    body: Any
    at: float = field(default_factory=time.monotonic)


def full_name(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


class OllamaStub:
    """A threaded HTTP server speaking Ollama's API. Use as a context manager.

    Fault switches (all off by default):
      ``max_input_chars``: embed inputs longer than this -> 400 "the input length exceeds
      the context length". ``poison``: a batch containing this substring -> 500.
      ``nan_marker``: inputs containing it get a NaN vector. ``drop_marker``: a batch
      containing it gets one vector fewer than inputs. ``delay``: seconds every POST
      sleeps before answering. ``delays``: per-request sleeps consumed in order (then
      ``delay``). ``load_delay``: extra seconds on the first request for each model (the
      model loading; ``unload()`` makes it load again). ``fail_next``: (status, message)
      pairs answered to the next POSTs in order. ``chat_reply``: the assistant's text, or
      a function of the request's messages. ``raw_body``: every POST gets a 200 with these
      bytes as ``text/html`` (another web server on Ollama's port). ``hang``: every POST
      waits, unanswered, until the stub is closed.
    """

    def __init__(self, models: dict[str, StubModel] | None = None) -> None:
        self.models = dict(DEFAULT_MODELS if models is None else models)
        self.requests: list[StubRequest] = []
        self.max_input_chars: int | None = None
        self.poison: str | None = None
        self.nan_marker: str | None = None
        self.drop_marker: str | None = None
        self.delay = 0.0
        self.delays: list[float] = []
        self.load_delay = 0.0
        self.fail_next: list[tuple[int, str]] = []
        self.raw_body: bytes | None = None
        self.hang = False
        self.chat_reply: str | Callable[[list[dict[str, Any]]], str] = "The answer is in gitrag/core.py."
        self._loaded: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(target=self._serve, name="ollama-stub", daemon=True)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, usable as ``ollama_host``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def start(self) -> OllamaStub:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops serving, like a killed server: requests still sleeping are abandoned at once,
        and a request on a kept-alive connection gets the connection closed, no answer."""
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OllamaStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def unload(self) -> None:
        """Forget loaded models: the next request for each pays ``load_delay`` again."""
        with self._lock:
            self._loaded.clear()

    def embed_requests(self) -> list[StubRequest]:
        """The ``/api/embed`` requests received so far, oldest first."""
        return [r for r in self.requests if r.path == "/api/embed"]

    # -- behaviour used by the handler ----------------------------------------------------

    def model(self, name: str) -> StubModel | None:
        return self.models.get(full_name(name or ""))

    def pause(self, model: str) -> None:
        """Sleeps as scripted: a queued or constant delay, plus loading on first use."""
        if self.hang:
            self._stop.wait()
            return
        with self._lock:
            wait = self.delays.pop(0) if self.delays else self.delay
            if model not in self._loaded:
                self._loaded.add(model)
                wait += self.load_delay
        if wait > 0:
            self._stop.wait(wait)

    def take_failure(self) -> tuple[int, str] | None:
        with self._lock:
            return self.fail_next.pop(0) if self.fail_next else None

    def vector(self, model: StubModel, text: str) -> list[float]:
        if self.nan_marker and self.nan_marker in text:
            return [float("nan")] * model.dim
        return [float(x) for x in HashEmbedder(dim=model.dim).embed_query(text)]

    def reply_for(self, messages: list[dict[str, Any]]) -> str:
        reply = self.chat_reply
        return reply(messages) if callable(reply) else reply


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    stub: OllamaStub

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is part of the tests, not an error


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def _show_body(name: str, m: StubModel) -> dict[str, Any]:
    params = f"num_ctx                        {m.num_ctx}" if m.num_ctx else ""
    return {
        "license": "Apache License 2.0",
        "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {name}\n"
        + (f"PARAMETER num_ctx {m.num_ctx}\n" if m.num_ctx else ""),
        "parameters": params,
        "template": "{{ .Prompt }}",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": m.family,
            "families": [m.family],
            "parameter_size": m.parameter_size,
            "quantization_level": "F16",
        },
        "model_info": {
            "general.architecture": m.arch,
            "general.file_type": 1,
            "general.parameter_count": 136727040,
            f"{m.arch}.attention.head_count": 12,
            f"{m.arch}.block_count": 12,
            f"{m.arch}.context_length": m.context_length,
            f"{m.arch}.embedding_length": m.dim,
            "tokenizer.ggml.model": "bert",
        },
        "capabilities": list(m.capabilities),
        "modified_at": "2025-01-01T00:00:00.000000000Z",
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing -------------------------------------------------------------------------

    @property
    def stub(self) -> OllamaStub:
        return self.server.stub

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()  # allow_nan: NaN reaches the client as Python's json writes it
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send_json(status, {"error": message})

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return None

    def do_GET(self) -> None:
        self.stub.requests.append(StubRequest("GET", self.path, None))
        if self.path == "/api/version":
            self._send_json(200, {"version": VERSION})
        elif self.path == "/api/tags":
            self._send_json(200, {"models": [self._tag(n, m) for n, m in self.stub.models.items()]})
        elif self.path == "/":
            self._plain(200, "Ollama is running")
        else:
            self._plain(404, "404 page not found")

    def do_POST(self) -> None:
        if self.stub._stop.is_set():  # closed: a kept-alive connection dies too, unanswered
            self.close_connection = True
            return
        body = self._read_body()
        self.stub.requests.append(StubRequest("POST", self.path, body))
        if self.stub.hang:
            self.stub.pause("")
            self.close_connection = True
            return
        if self.stub.raw_body is not None:
            return self._raw(200, self.stub.raw_body)
        routes = {"/api/embed": self._embed, "/api/show": self._show, "/api/chat": self._chat}
        route = routes.get(self.path)
        if route is None:
            self._plain(404, "404 page not found")
        elif not isinstance(body, dict):
            self._error(400, "invalid request body")
        else:
            route(body)

    def _raw(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _plain(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _tag(self, name: str, m: StubModel) -> dict[str, Any]:
        return {
            "name": name,
            "model": name,
            "modified_at": "2025-01-01T00:00:00.000000000Z",
            "size": 274302450,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": _show_body(name, m)["details"],
        }

    def _find_model(self, body: dict[str, Any]) -> tuple[str, StubModel] | None:
        name = str(body.get("model") or "")
        m = self.stub.model(name)
        if m is None:
            self._error(404, f'model "{name}" not found, try pulling it first')
            return None
        return full_name(name), m

    # -- endpoints --------------------------------------------------------------------------

    def _show(self, body: dict[str, Any]) -> None:
        found = self._find_model(body)
        if found:
            self._send_json(200, _show_body(*found))

    def _embed(self, body: dict[str, Any]) -> None:
        found = self._find_model(body)
        if not found:
            return
        name, m = found
        started = time.monotonic()
        self.stub.pause(name)
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        if (failure := self.stub.take_failure()) is not None:
            return self._error(*failure)
        stub = self.stub
        if stub.max_input_chars is not None and any(len(t) > stub.max_input_chars for t in texts):
            return self._error(400, TOO_LONG_ERROR)
        if stub.poison and any(stub.poison in t for t in texts):
            return self._error(500, "llama runner process has terminated: GGML_ASSERT failed")
        vectors = [stub.vector(m, t) for t in texts]
        if stub.drop_marker and any(stub.drop_marker in t for t in texts):
            vectors = vectors[:-1]
        elapsed = int((time.monotonic() - started) * 1e9)
        self._send_json(200, {
            "model": name,
            "embeddings": vectors,
            "total_duration": elapsed + 1_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": sum(len(t.split()) + 2 for t in texts),
        })

    def _chat(self, body: dict[str, Any]) -> None:
        found = self._find_model(body)
        if not found:
            return
        name, _ = found
        self.stub.pause(name)
        if (failure := self.stub.take_failure()) is not None:
            return self._error(*failure)
        messages = list(body.get("messages") or [])
        reply = self.stub.reply_for(messages)
        stats = {
            "total_duration": 5_000_000, "load_duration": 1_000_000,
            "prompt_eval_count": sum(len(str(m.get("content", "")).split()) for m in messages),
            "prompt_eval_duration": 1_000_000, "eval_count": len(reply.split()), "eval_duration": 3_000_000,
        }
        if body.get("stream", True) is False:
            msg = {"role": "assistant", "content": reply}
            return self._send_json(200, {"model": name, "created_at": _now(), "message": msg,
                                         "done_reason": "stop", "done": True, **stats})
        self._stream_chat(name, reply, stats)

    def _stream_chat(self, name: str, reply: str, stats: dict[str, int]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        pieces = [w + " " for w in reply.split(" ")]
        pieces[-1] = pieces[-1][:-1]
        for piece in pieces:
            self._chunk({"model": name, "created_at": _now(),
                         "message": {"role": "assistant", "content": piece}, "done": False})
        self._chunk({"model": name, "created_at": _now(), "message": {"role": "assistant", "content": ""},
                     "done_reason": "stop", "done": True, **stats})
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
