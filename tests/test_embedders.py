"""Embedders: the bundled static model (checksum, offline, lazy), the real local model
(e2e, offline; needs gitrag[transformer]), the Ollama embedder against a stub server
speaking Ollama's JSON (happy path, every fault, partial failures), the registry and
fingerprints."""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs

from gitrag.config import Settings
from gitrag.errors import ConfigError, EmbedderError, EmbedderUnavailable
from gitrag.index.embedders import available, base, create
from gitrag.index.embedders.hashing import HashEmbedder
from gitrag.index.embedders.local import LocalEmbedder, default_model_path
from gitrag.index.embedders.ollama import OllamaEmbedder, context_length, estimate_tokens
from gitrag.index.embedders.static import MODEL_DIR, MODEL_SHA256, StaticEmbedder
from tests.ollama_stub import OllamaStub, StubModel

CODE = [
    "def add(a, b):\n    return a + b\n",
    "def sum_two(x, y):\n    \"\"\"Sum of two numbers.\"\"\"\n    return x + y\n",
    "class HttpServer:\n    def listen(self, port):\n        self.sock.bind(('', port))\n",
    "CHUNK_OVERLAP = 10\nMAX_TOKENS = 256\n",
    "# Ünïcödé comment — 日本語\nname = 'naïve'\n",
]


def _unit_rows(v: np.ndarray) -> bool:
    return bool(np.allclose(np.linalg.norm(v, axis=-1), 1.0, atol=1e-5))


# -- static: the bundled model ------------------------------------------------------------


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_static_model_is_bundled_with_its_checksum_and_license() -> None:
    config = json.loads((MODEL_DIR / "config.json").read_text())
    assert _sha256(MODEL_DIR / "model.safetensors") == MODEL_SHA256 == config["model_sha256"]
    assert "Apache License, Version 2.0" in (MODEL_DIR / "LICENSE").read_text()
    assert config["teacher"] == "sentence-transformers/all-MiniLM-L6-v2"
    e = StaticEmbedder()
    assert (e.dim, e.max_tokens, e.model_sha256) == (config["hidden_dim"], 256, MODEL_SHA256)


def test_static_loads_offline_without_torch_in_a_fresh_process() -> None:
    # No socket but unix/loopback may open; no torch, transformers or sentence-transformers, ever.
    script = textwrap.dedent("""
        import json, socket, sys
        def guard(self, addr, *a):
            if self.family == socket.AF_UNIX or str(addr[0]) in ("127.0.0.1", "::1", "localhost"):
                return real(self, addr, *a)
            raise OSError(f"network access attempted: {addr}")
        real = socket.socket.connect
        socket.socket.connect = guard
        socket.getaddrinfo = lambda *a, **k: (_ for _ in ()).throw(OSError(f"DNS lookup: {a[0]}"))
        from gitrag.config import Settings
        from gitrag.index.embedders import create
        e = create(Settings())
        tokens = e.count_tokens("def f(): pass")
        v = e.embed_documents(["def f(): pass", "import os"])
        q = e.embed_query("where is f defined")
        heavy = sorted(m for m in ("torch", "transformers", "sentence_transformers", "model2vec") if m in sys.modules)
        print(json.dumps({"name": e.name, "heavy": heavy, "shape": list(v.shape), "dtype": str(v.dtype),
                          "query": list(q.shape), "tokens": tokens}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "GITRAG_EMBEDDER"}}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    dim = StaticEmbedder().dim
    assert result == {"name": "static", "heavy": [], "shape": [2, dim], "dtype": "float32", "query": [dim], "tokens": 8}


def test_static_gives_unit_vectors_and_ranks_similar_code_closer() -> None:
    e = StaticEmbedder()
    docs = e.embed_documents(CODE)
    assert docs.shape == (len(CODE), e.dim) and docs.dtype == np.float32 and _unit_rows(docs)
    sims = docs @ docs.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 1] > sims[0, 3]
    query = e.embed_query("open a server socket on a port")
    assert query.shape == (e.dim,) and _unit_rows(query[None])
    assert int(np.argmax(docs @ query)) == 2


def test_static_batches_agree_with_single_embeddings_and_blank_texts_get_a_unit_vector() -> None:
    e = StaticEmbedder()
    texts = [*CODE, "", "   \n\t", "[CLS] [SEP]"]
    together = e.embed_documents(texts)
    alone = np.stack([e.embed_documents([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-6) and _unit_rows(together)
    assert np.array_equal(together[len(CODE)], np.eye(e.dim, dtype=np.float32)[0])
    assert e.embed_documents([]).shape == (0, e.dim)
    # a chunk is embedded whole: a change past the teacher's 256 tokens still moves the vector
    long_text = "def f():\n" + "    value = compute(value, other)\n" * 200
    assert e.count_tokens(long_text) > e.max_tokens
    assert not np.allclose(e.embed_documents([long_text]), e.embed_documents([long_text + "\nraise SocketTimeout"]))


def test_static_counts_tokens_like_the_transformer_so_chunks_are_the_same() -> None:
    from tokenizers import Tokenizer

    # the teacher's tokenizer as sentence-transformers would use it: [CLS] + tokens + [SEP], untruncated
    teacher = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    teacher.no_truncation()
    teacher.no_padding()
    texts = [*CODE, "x = 1\n" * 300, "", "fooBarBaz_qux123 = {'a': [1, 2]}"]
    e = StaticEmbedder()
    expected = [len(teacher.encode(t).ids) for t in texts]
    assert expected[-3] > 256 and expected[-2] == 2
    assert e.count_tokens_batch(texts) == expected == [e.count_tokens(t) for t in texts]
    assert e.max_tokens == 256


@pytest.mark.transformer
def test_static_tokenizer_is_the_transformers_own() -> None:
    local = LocalEmbedder()
    assert _sha256(MODEL_DIR / "tokenizer.json") == _sha256(local.path / "tokenizer.json")
    assert StaticEmbedder().max_tokens == local.max_tokens


def test_static_fingerprint_names_the_model_and_a_broken_model_is_unavailable(tmp_path: Path) -> None:
    e = StaticEmbedder()
    assert e.fingerprint.startswith("static-") and e.fingerprint == StaticEmbedder().fingerprint
    copy = tmp_path / "other-static"
    shutil.copytree(MODEL_DIR, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "model_sha256": "0" * 64}))
    assert StaticEmbedder(copy).fingerprint != e.fingerprint  # other vectors, other collection
    assert create(Settings(static_model=str(copy))).fingerprint == StaticEmbedder(copy).fingerprint
    with pytest.raises(EmbedderUnavailable, match="reinstall gitrag"):
        StaticEmbedder(tmp_path / "nowhere")
    (copy / "model.safetensors").write_bytes(b"not a safetensors file")
    broken = StaticEmbedder(copy)
    assert broken.count_tokens("x = 1") == 5  # the tokenizer is fine
    with pytest.raises(EmbedderUnavailable, match="cannot load the static model's vectors"):
        broken.embed_documents(["x = 1"])


# -- local: the real model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = create(Settings(embedder="local", batch_size=4))
    assert isinstance(embedder, LocalEmbedder)
    return embedder


@pytest.mark.e2e
@pytest.mark.transformer
def test_local_loads_offline_and_lazily_in_a_fresh_process() -> None:
    # No socket but unix/loopback may open; torch must not load before the first embed.
    script = textwrap.dedent("""
        import json, socket, sys
        def guard(self, addr, *a):
            if self.family == socket.AF_UNIX or str(addr[0]) in ("127.0.0.1", "::1", "localhost"):
                return real(self, addr, *a)
            raise OSError(f"network access attempted: {addr}")
        real = socket.socket.connect
        socket.socket.connect = guard
        socket.getaddrinfo = lambda *a, **k: (_ for _ in ()).throw(OSError(f"DNS lookup: {a[0]}"))
        from gitrag.config import Settings
        from gitrag.index.embedders import create
        e = create(Settings(embedder="local"))
        tokens = e.count_tokens("def f(): pass")
        lazy = "torch" not in sys.modules and "sentence_transformers" not in sys.modules
        v = e.embed_documents(["def f(): pass", "import os"])
        import os
        print(json.dumps({"lazy": lazy, "shape": list(v.shape), "dtype": str(v.dtype), "tokens": tokens,
                          "offline": os.environ.get("HF_HUB_OFFLINE")}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"lazy": True, "shape": [2, 384], "dtype": "float32", "tokens": 8, "offline": "1"}


@pytest.mark.e2e
@pytest.mark.transformer
def test_local_gives_unit_384_vectors_and_ranks_similar_code_closer(local: LocalEmbedder) -> None:
    docs = local.embed_documents(CODE)
    assert docs.shape == (len(CODE), 384) and docs.dtype == np.float32 and _unit_rows(docs)
    assert local.dim == 384 and local.max_tokens == 256
    sims = docs @ docs.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 1] > sims[0, 3]
    query = local.embed_query("add two numbers together")
    assert query.shape == (384,) and query.dtype == np.float32 and _unit_rows(query[None])
    assert int(np.argmax(docs @ query)) in (0, 1)


@pytest.mark.e2e
@pytest.mark.transformer
def test_local_batches_agree_with_single_embeddings(local: LocalEmbedder) -> None:
    together = local.embed_documents(CODE)
    alone = np.stack([local.embed_documents([t])[0] for t in CODE])
    assert np.allclose(together, alone, atol=1e-4)
    assert local.embed_documents([]).shape == (0, 384)


@pytest.mark.e2e
@pytest.mark.transformer
def test_local_count_tokens_matches_the_models_tokenizer(local: LocalEmbedder) -> None:
    tok = local._get_model().tokenizer  # the tokenizer sentence-transformers itself uses
    texts = [*CODE, "x" * 3000, "", "fooBarBaz_qux123 = {'a': [1, 2]}"]
    expected = [len(tok(t, truncation=False)["input_ids"]) for t in texts]
    assert local.count_tokens_batch(texts) == expected
    assert [local.count_tokens(t) for t in texts] == expected


@pytest.mark.e2e
@pytest.mark.transformer
def test_local_truncates_and_logs_an_overlong_input(local: LocalEmbedder) -> None:
    long_text = "def f():\n" + "    value = compute(value, other)\n" * 200
    assert local.count_tokens(long_text) > local.max_tokens
    with capture_logs() as logs:
        vectors, failed = base.embed_partial(local, [CODE[0], long_text])
    assert vectors.shape == (2, 384) and failed == [] and _unit_rows(vectors)
    assert any(e["event"] == "local inputs truncated" and e["indices"] == [1] for e in logs)


@pytest.mark.transformer
def test_local_reads_shape_from_the_folder_without_loading(tmp_path: Path) -> None:
    folder = tmp_path / "my-minilm"
    src = default_model_path()
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    embedder = LocalEmbedder(folder)
    assert (embedder.dim, embedder.max_tokens, embedder.model_name) == (384, 256, "my-minilm")
    default = LocalEmbedder()
    assert default.model_name == "all-MiniLM-L6-v2"
    assert embedder.fingerprint != default.fingerprint  # another model name
    sbert = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps({**sbert, "max_seq_length": 128}))
    assert LocalEmbedder(folder).fingerprint != embedder.fingerprint  # another truncation


@pytest.mark.transformer
def test_local_missing_model_is_unavailable_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(EmbedderUnavailable, match="local_model"):
        LocalEmbedder(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(default_model_path(), broken, ignore=shutil.ignore_patterns("*.safetensors"))
    with pytest.raises(EmbedderUnavailable, match="cannot load the local model"):
        LocalEmbedder(broken).embed_documents(["x"])


# -- ollama against the stub ----------------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[OllamaStub]:
    with OllamaStub() as server:
        yield server


def make(stub: OllamaStub, model: str = "nomic-embed-text", **kw: Any) -> OllamaEmbedder:
    options: dict[str, Any] = {"timeout": 0.5, "batch_size": 4, "retry_delays": (0.05, 0.05)}
    return OllamaEmbedder(host=stub.url, model=model, **{**options, **kw})


def inputs_sent(stub: OllamaStub) -> list[list[str]]:
    return [r.body["input"] for r in stub.embed_requests()]


def test_ollama_happy_path_sends_prefixes_in_batches(stub: OllamaStub) -> None:
    e = make(stub)
    assert (e.dim, e.max_tokens) == (768, 2048)  # min(context_length 2048, num_ctx 8192)
    stub.requests.clear()
    vectors = e.embed_documents([f"def f{i}(): pass" for i in range(10)])
    assert vectors.shape == (10, 768) and vectors.dtype == np.float32 and _unit_rows(vectors)
    sent = inputs_sent(stub)
    assert [len(b) for b in sent] == [4, 4, 2]
    assert all(t.startswith("search_document: def f") for b in sent for t in b)
    assert all(r.body["model"] == "nomic-embed-text" and r.body["keep_alive"] for r in stub.embed_requests())
    query = e.embed_query("where is f3")
    assert query.shape == (768,) and _unit_rows(query[None])
    assert inputs_sent(stub)[-1] == ["search_query: where is f3"]
    again = e.embed_documents(["def f0(): pass"])
    assert np.allclose(again[0], vectors[0])  # deterministic


@pytest.mark.parametrize(
    ("model", "query_prefix", "doc_prefix", "dim", "max_tokens"),
    [
        ("mxbai-embed-large", "Represent this sentence for searching relevant passages: ", "", 1024, 512),
        ("all-minilm:latest", "", "", 384, 512),
    ],
)
def test_ollama_prefixes_per_model(
    stub: OllamaStub, model: str, query_prefix: str, doc_prefix: str, dim: int, max_tokens: int
) -> None:
    e = make(stub, model)
    e.embed_documents(["code"])
    e.embed_query("question")
    assert inputs_sent(stub)[-2:] == [[doc_prefix + "code"], [query_prefix + "question"]]
    assert (e.dim, e.max_tokens) == (dim, max_tokens)
    assert e.count_tokens("code") == estimate_tokens(doc_prefix) + estimate_tokens("code") + 2


def test_ollama_server_not_running_says_start_it() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    e = OllamaEmbedder(host=f"http://127.0.0.1:{port}", timeout=0.5, retry_delays=())
    with pytest.raises(EmbedderUnavailable, match=r"cannot reach Ollama at .*`ollama serve`"):
        e.embed_documents(["x"])


def test_ollama_model_not_pulled_says_pull_it(stub: OllamaStub) -> None:
    with pytest.raises(EmbedderUnavailable, match=r"run `ollama pull nope`"):
        make(stub, "nope").embed_documents(["x"])
    with pytest.raises(EmbedderUnavailable, match=r"run `ollama pull nope`"):
        _ = make(stub, "nope").max_tokens


def test_a_404_that_is_not_ollamas_does_not_say_pull_the_model(stub: OllamaStub) -> None:
    """Another server (or a proxy) answering 404 with an empty body is not a missing model."""
    for body in ("", "404 page not found"):
        stub.fail_next = [(404, body)]
        with pytest.raises(EmbedderUnavailable) as info:
            make(stub).embed_documents(["x"])
        assert "ollama pull" not in str(info.value) and "is ollama_host an Ollama server?" in str(info.value)
        assert f"Ollama at {stub.url} answered " in str(info.value) and " with HTTP 404 and no Ollama error" in str(info.value)


def test_ollama_chat_model_is_refused_for_embedding(stub: OllamaStub) -> None:
    with pytest.raises(EmbedderUnavailable, match="cannot embed"):
        _ = make(stub, "llama3.2").max_tokens


def test_ollama_too_long_input_is_isolated_and_shortened(stub: OllamaStub) -> None:
    e = make(stub)
    _ = e.dim
    stub.max_input_chars = 200
    texts = ["short one", "y" * 1000, "short two"]
    with capture_logs() as logs:
        vectors, failed = e.embed_documents_partial(texts)
    assert failed == [] and vectors.shape == (3, 768) and _unit_rows(vectors)
    assert any(e["event"] == "ollama input too long; embedded its head" and e["index"] == 1 for e in logs)
    head = [b[0] for b in inputs_sent(stub) if len(b) == 1 and "yyy" in b[0]][-1]
    assert len(head) <= 200 and head.startswith("search_document: yyy")


def test_ollama_partial_failures_report_exactly_the_bad_indices(stub: OllamaStub) -> None:
    e = make(stub)
    _ = e.dim
    stub.poison, stub.nan_marker, stub.drop_marker = "POISON", "NANVEC", "DROPME"
    texts = [f"chunk {i}" for i in range(12)]
    for i, marker in {1: "POISON", 6: "NANVEC", 7: "DROPME", 11: "POISON"}.items():
        texts[i] += f" {marker}"
    with capture_logs() as logs:
        vectors, failed = base.embed_partial(e, texts)
    assert failed == [1, 6, 7, 11]
    good = [i for i in range(12) if i not in failed]
    expected = make(stub).embed_documents([texts[i] for i in good])
    assert vectors.shape == (12, 768) and np.allclose(vectors[good], expected)
    assert not vectors[failed].any()  # failed rows are zeros, never NaN
    assert sorted(e["index"] for e in logs if e["event"] == "ollama input skipped") == failed
    with pytest.raises(EmbedderError, match=r"4 of 12 input\(s\) \(indices \[1, 6, 7, 11\]\)"):
        e.embed_documents(texts)


def test_ollama_nan_in_a_batch_is_retried_alone_once(stub: OllamaStub) -> None:
    e = make(stub)
    _ = e.dim
    stub.nan_marker = "NANVEC"
    stub.requests.clear()
    vectors, failed = e.embed_documents_partial(["a", "b NANVEC", "c"])
    assert failed == [1] and vectors.shape == (3, 768) and _unit_rows(vectors[[0, 2]])
    assert inputs_sent(stub) == [["search_document: a", "search_document: b NANVEC", "search_document: c"],
                                 ["search_document: b NANVEC"]]


def test_ollama_query_failure_raises(stub: OllamaStub) -> None:
    e = make(stub)
    stub.nan_marker = "NANVEC"
    with pytest.raises(EmbedderError, match="could not embed the query"):
        e.embed_query("NANVEC")


def test_ollama_server_rejecting_everything_is_unavailable_not_partial(stub: OllamaStub) -> None:
    e = make(stub)
    _ = e.dim
    stub.poison = "search_document"
    with pytest.raises(EmbedderUnavailable, match="rejects every input"):
        e.embed_documents_partial(["a", "b"])


def test_ollama_timeouts_are_retried_then_unavailable(stub: OllamaStub) -> None:
    e = make(stub, timeout=0.3)
    _ = e.dim
    stub.delays = [1.0]  # the first try hangs, the retry answers
    assert e.embed_documents(["x"]).shape == (1, 768)
    stub.requests.clear()
    stub.delay = 1.0
    with pytest.raises(EmbedderUnavailable, match=r"timed out: no answer to embed within 0.3 s \(2 tries\)"):
        e.embed_documents(["x"])
    assert len(stub.embed_requests()) == 2  # bounded: a timeout is retried once (a hung server stays hung)


def test_ollama_busy_server_is_retried(stub: OllamaStub) -> None:
    e = make(stub)
    _ = e.dim
    stub.fail_next = [(503, "server busy, please try again.  maximum pending requests exceeded")]
    assert e.embed_documents(["x"]).shape == (1, 768)


def test_ollama_slow_model_load_gets_a_longer_first_timeout(stub: OllamaStub) -> None:
    stub.load_delay = 0.6
    e = make(stub, timeout=0.3, cold_factor=4.0, keep_alive_s=0.5, retry_delays=())
    assert e.embed_documents(["x"]).shape == (1, 768)  # probe + request, no retry needed
    assert len(stub.embed_requests()) == 2
    stub.unload()
    stub.delays = [0.0]
    import time

    time.sleep(0.6)  # idle longer than keep_alive: the model is loading again
    assert e.embed_documents(["y"]).shape == (1, 768)


def test_ollama_dimension_change_is_an_error(stub: OllamaStub) -> None:
    e = make(stub, "all-minilm")
    _ = e.dim
    stub.models["all-minilm:latest"] = StubModel("bert", 512, 512)
    with pytest.raises(EmbedderError, match="512-dim vectors, expected 384"):
        e.embed_documents(["x"])


def test_context_length_from_show() -> None:
    assert context_length({"general.architecture": "bert", "bert.context_length": 512}, "") == 512
    assert context_length({"general.architecture": "nomic-bert", "nomic-bert.context_length": 2048},
                          "num_ctx                        8192") == 2048
    assert context_length({}, "num_ctx 1024\nstop x") == 1024
    assert context_length({}, "") == 2048


def test_estimated_tokens_rarely_undercount_real_code() -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))  # all-MiniLM-L6-v2's, bundled
    tok.no_truncation()
    tok.no_padding()
    sources = sorted(glob.glob(os.path.join(os.path.dirname(json.__file__), "*.py")))
    chunks = [s[i : i + 1200] for f in sources for s in [Path(f).read_text()] for i in range(0, len(s), 1200)]
    real = np.array([len(e.ids) for e in tok.encode_batch(chunks)])
    estimated = np.array([estimate_tokens(c) + 2 for c in chunks])
    assert (estimated < real).mean() < 0.05
    assert (estimated / real).min() > 0.7


# -- registry and fingerprints ----------------------------------------------------------------


def test_registry_creates_each_embedder_by_name(stub: OllamaStub) -> None:
    assert {"hash", "local", "ollama", "static"} <= set(available())
    assert isinstance(create(Settings(embedder="hash")), HashEmbedder)
    assert isinstance(create(Settings()), StaticEmbedder)  # the default
    e = create(Settings(embedder="ollama", ollama_host=stub.url, ollama_model="mxbai-embed-large", batch_size=7))
    assert isinstance(e, OllamaEmbedder) and (e.model, e.batch_size, e.dim) == ("mxbai-embed-large", 7, 1024)
    assert isinstance(e, base.Embedder)
    with pytest.raises(ConfigError, match="unknown embedder 'nope'"):
        create(Settings(embedder="nope"))


@pytest.mark.transformer
def test_registry_creates_the_local_embedder_with_the_transformer_extra() -> None:
    assert isinstance(create(Settings(embedder="local")), LocalEmbedder)


def test_fingerprints_differ_across_model_prefix_and_dim(stub: OllamaStub) -> None:
    nomic, mxbai, minilm = (make(stub, m) for m in ("nomic-embed-text", "mxbai-embed-large", "all-minilm"))
    prints = {nomic.fingerprint, mxbai.fingerprint, minilm.fingerprint}
    assert len(prints) == 3 and all(p.startswith("ollama-") for p in prints)
    assert make(stub, "nomic-embed-text:latest").fingerprint == nomic.fingerprint  # same model
    reprefixed = make(stub, "nomic-embed-text")
    reprefixed.query_prefix = "query: "
    assert reprefixed.fingerprint != nomic.fingerprint
    stub.models["all-minilm:latest"] = StubModel("bert", 256, 512)
    assert make(stub, "all-minilm").fingerprint != minilm.fingerprint
    # the in-process models (static needs no extra) name themselves apart from Ollama's
    assert create(Settings(embedder="static")).fingerprint not in prints | {HashEmbedder().fingerprint}


def test_embed_partial_works_for_embedders_without_partial_support() -> None:
    vectors, failed = base.embed_partial(HashEmbedder(), ["a", "b"])
    assert vectors.shape == (2, 64) and failed == []


# -- the stub itself (other tests use its chat endpoint) -------------------------------------


def test_stub_speaks_ollamas_chat_tags_and_version(stub: OllamaStub) -> None:
    import httpx
    import ollama

    client = ollama.Client(host=stub.url, timeout=2)
    stub.chat_reply = "Look at gitrag/core.py line 3."
    parts = list(client.chat(model="llama3.2", messages=[{"role": "user", "content": "where?"}], stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Look at gitrag/core.py line 3."
    assert [p.done for p in parts][-2:] == [False, True] and parts[-1].done_reason == "stop"
    whole = client.chat(model="llama3.2", messages=[{"role": "user", "content": "where?"}])
    assert whole.message.content == "Look at gitrag/core.py line 3." and whole.done
    assert {m.model for m in client.list().models} >= {"nomic-embed-text:latest", "llama3.2:latest"}
    assert httpx.get(f"{stub.url}/api/version").json() == {"version": "0.6.8"}
    with pytest.raises(ollama.ResponseError, match="not found, try pulling it first") as info:
        client.chat(model="nope", messages=[])
    assert info.value.status_code == 404
    assert stub.requests[0].path == "/api/chat" and stub.requests[0].body["messages"][0]["content"] == "where?"


def test_ollama_hosts_are_read_as_ollama_reads_ollama_host() -> None:
    from gitrag.errors import ConfigError
    from gitrag.index.embedders.ollama import parse_host

    assert parse_host("127.0.0.1") == "http://127.0.0.1:11434"
    assert parse_host(":56789") == "http://127.0.0.1:56789"
    assert parse_host("example.com:56789/") == "http://example.com:56789"
    assert parse_host("https://example.com") == "https://example.com:443"
    assert parse_host("http://[::1]:8080/ollama/") == "http://[::1]:8080/ollama"
    for bad in ("127.0.0.1:99999", "127.0.0.1:0", "host:port", "ftp://127.0.0.1:21", "unix:///run/ollama.sock"):
        with pytest.raises(ConfigError, match="ollama_host"):
            parse_host(bad)


def test_optional_capabilities_are_named_protocols(stub: OllamaStub) -> None:
    """Each embedder says what it offers beyond the Embedder protocol through named protocols
    (base.PartialEmbedder, SpanEmbedder, SelfChecking), not through attributes looked up by name."""
    offers = {}
    for name in ("hash", "static", "ollama"):
        e = create(Settings(embedder=name, ollama_host=stub.url, ollama_model="nomic-embed-text"))
        offers[name] = {p.__name__ for p in (base.PartialEmbedder, base.SpanEmbedder, base.SelfChecking)
                        if isinstance(e, p)}
    assert offers == {"hash": set(), "static": {"SpanEmbedder", "SelfChecking"}, "ollama": {"PartialEmbedder"}}


def test_doctor_reaches_a_local_ollama_as_the_embedder_does_whatever_the_proxy(
        stub: OllamaStub, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor lists the pulled models through ollamahost, as the embedder reaches the server:
    a local server directly, never through the environment's proxy (nothing listens there)."""
    from gitrag.surfaces.commands.doctor import check_embedder

    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    check = check_embedder(Settings(embedder="ollama", ollama_host=stub.url, ollama_model="nomic-embed-text"))
    assert (check.status, check.detail) == ("ok", f"Ollama at {stub.url}, model nomic-embed-text pulled")
