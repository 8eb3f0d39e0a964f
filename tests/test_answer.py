"""Written answers: evidence budget, citation checks, weak evidence, a dead Ollama.

The chat model is the stand-in Ollama server (tests/ollama_stub.py) speaking the real
``/api/chat`` NDJSON stream; ``gitrag ask`` runs through click's CliRunner.
"""

from __future__ import annotations

import json
import random
import re
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from click.testing import Result as CliResult

from gitrag.index.workspace import open_workspace
from gitrag.query.answer import (
    CitationFilter,
    Evidence,
    check_citations,
    count_tokens,
    evidence_strength,
    select_evidence,
)
from gitrag.query.retrieval import Result
from gitrag.surfaces.cli import cli
from tests.gitutil import Repo, index
from tests.ollama_stub import OllamaStub

GREETER = '''\
"""Greetings for people."""


class Greeter:
    """Builds a greeting for one person."""

    def __init__(self, name: str) -> None:
        self.name = name

    def greet(self) -> str:
        """Return the greeting text."""
        return f"Hello, {self.name}!"
'''

TRANSPORT = '''\
"""Sending messages over the wire."""

RETRY_LIMIT = 5


def send_message(text: str, retries: int = RETRY_LIMIT) -> bool:
    """Send text, retrying up to RETRY_LIMIT times."""
    for _ in range(retries):
        if _attempt(text):
            return True
    return False


def _attempt(text: str) -> bool:
    return bool(text)
'''


@pytest.fixture
def indexed(repo: Repo) -> Repo:
    repo.write("app/greeter.py", GREETER)
    repo.write("app/transport.py", TRANSPORT)
    repo.commit("two modules")
    index(repo.path)
    return repo


@pytest.fixture
def stub() -> Any:
    with OllamaStub() as s:
        yield s


def _ask(repo: Repo, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return CliRunner().invoke(cli, ["ask", *args, "--repo", str(repo.path)], env=env, catch_exceptions=False)


def _evidence_headers(messages: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    user = messages[-1]["content"]
    return [(p, int(s), int(e)) for p, s, e in re.findall(r"^\[\d+\] (\S+):(\d+)-(\d+)", user, re.M)]


def _citing_reply(messages: list[dict[str, Any]]) -> str:
    """A reply citing the first evidence item (valid), plus a path never retrieved and a
    range of a retrieved path that no retrieved chunk covers (both invalid)."""
    path, start, end = _evidence_headers(messages)[0]
    return (f"The work happens in {path}:{start}-{end} as shown. "
            f"It is configured elsewhere (config/settings.py:1-9). "
            f"See also [{path}:{end + 500}-{end + 510}]. Done.")


# -- through the CLI ------------------------------------------------------------------------


def test_answer_streams_with_valid_citations_only(indexed: Repo, stub: OllamaStub) -> None:
    stub.chat_reply = _citing_reply
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    res = _ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env)
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    chat = [r for r in stub.requests if r.path == "/api/chat"]
    assert len(chat) == 1 and chat[0].body["stream"] is True and chat[0].body["model"] == "llama3.2"
    assert "path:start-end" in chat[0].body["messages"][0]["content"]  # the system prompt demands citations
    path, start, end = _evidence_headers(chat[0].body["messages"])[0]
    valid = f"{path}:{start}-{end}"
    assert valid in data["answer"]
    assert "config/settings.py" not in data["answer"] and f"{end + 500}" not in data["answer"]
    assert "()" not in data["answer"] and "[]" not in data["answer"]  # emptied groups went too
    assert [c["text"] for c in data["citations"]["kept"]] == [valid]
    assert {c["text"] for c in data["citations"]["dropped"]} == {"config/settings.py:1-9", f"{path}:{end + 500}-{end + 510}"}
    assert data["answer_error"] is None and data["chat_model"] == "llama3.2"
    assert data["evidence"][0]["n"] == 1 and data["evidence_strength"]["weak"] is False
    assert data["results"], "the ranked citations are still there"


def test_human_output_streams_answer_then_citations(indexed: Repo, stub: OllamaStub) -> None:
    stub.chat_reply = _citing_reply
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    res = _ask(indexed, "send_message retries RETRY_LIMIT", env=env)
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "as shown." in out and "config/settings.py" not in out
    assert out.index("Done.") < out.index(" 1. app/")  # answer first, then the ranked citations
    assert res.stderr == ""


def test_weak_evidence_skips_the_model(indexed: Repo, stub: OllamaStub) -> None:
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    # no word of this question is in the repository and it names no identifier: only the
    # dense search finds anything, so no result is found by two lists (top score <= 0.5 + 0.2)
    res = _ask(indexed, "zebra quantum marmalade", env=env)
    assert res.exit_code == 0, res.stderr
    assert "the index has no strong match for 'zebra quantum marmalade'" in res.stdout
    assert " 1. app/" in res.stdout  # the closest locations still print
    assert not [r for r in stub.requests if r.path == "/api/chat"]
    data = json.loads(_ask(indexed, "zebra quantum marmalade", "--json", env=env).stdout)
    assert data["answer"] is None and data["evidence_strength"]["weak"] is True
    assert "no result was found by two" in data["evidence_strength"]["reason"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dead_server_is_one_line_and_citations_still_print(indexed: Repo) -> None:
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": f"http://127.0.0.1:{_closed_port()}"}
    res = _ask(indexed, "send_message retries RETRY_LIMIT", env=env)
    assert res.exit_code == 0
    err = " ".join(res.stderr.split())  # rich wraps long lines at 80 columns off a terminal
    assert err.count("gitrag: error:") == 1 and "cannot reach Ollama at http://127.0.0.1:" in err and "ollama serve" in err
    assert " 1. app/transport.py:" in res.stdout
    data = json.loads(_ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env).stdout)
    assert data["answer"] is None and "cannot reach Ollama" in data["answer_error"]
    assert data["results"][0]["path"] == "app/transport.py"


@pytest.mark.parametrize("form", ["127.0.0.1:{port}", "0.0.0.0:{port}", "localhost:{port}", "http://localhost:{port}/"])
def test_chat_reads_ollama_host_as_the_embedder_does(indexed: Repo, stub: OllamaStub, form: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """OLLAMA_HOST's forms reach the same local server for chat as for embeddings, and a
    proxy of the environment (dead here) is not used for a server on this machine."""
    from gitrag.index.embedders.ollama import OllamaEmbedder

    dead_proxy = f"http://127.0.0.1:{_closed_port()}"
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, dead_proxy)
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    host = form.format(port=stub.url.rsplit(":", 1)[1])
    assert OllamaEmbedder(host=host).embed_query("retries").shape == (768,)
    data = json.loads(_ask(indexed, "send_message retries RETRY_LIMIT", "--json",
                           env={"GITRAG_CHAT_MODEL": "llama3.2", "OLLAMA_HOST": host}).stdout)
    assert data["answer_error"] is None and data["answer"], data["answer_error"]
    assert [r.path for r in stub.requests].count("/api/chat") == 1


def test_chat_host_errors_name_the_host_as_parsed(indexed: Repo) -> None:
    port = _closed_port()
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": f":{port}"}
    data = json.loads(_ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env).stdout)
    assert f"cannot reach Ollama at http://127.0.0.1:{port} " in data["answer_error"]
    env["GITRAG_OLLAMA_HOST"] = "ftp://127.0.0.1:21"
    res = _ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env)
    data = json.loads(res.stdout)
    assert res.exit_code == 0 and data["results"] and data["answer"] is None
    assert data["answer_error"].startswith("ollama_host 'ftp://127.0.0.1:21': Ollama speaks http:// or https://")


def test_missing_chat_model_says_how_to_pull(indexed: Repo, stub: OllamaStub) -> None:
    env = {"GITRAG_CHAT_MODEL": "nosuchmodel", "GITRAG_OLLAMA_HOST": stub.url}
    data = json.loads(_ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env).stdout)
    assert "ollama pull nosuchmodel" in data["answer_error"]


def test_a_404_that_is_not_ollamas_does_not_say_pull_the_chat_model(indexed: Repo, stub: OllamaStub) -> None:
    stub.fail_next = [(404, "")]  # a proxy or another server answering on Ollama's address
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    data = json.loads(_ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env).stdout)
    assert data["results"] and "ollama pull" not in data["answer_error"]
    assert data["answer_error"].startswith(f"Ollama at {stub.url} answered the chat with HTTP 404 and no Ollama error")


def _on_a_terminal(repo: Repo, *args: str) -> str:
    """What a real `gitrag ask ARGS` process writes to a terminal (a pty as its stdout and stderr)."""
    import os
    import pty
    import subprocess
    import sys

    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gitrag", "ask", *args, "--repo", str(repo.path)],
                            stdin=subprocess.DEVNULL, stdout=side, stderr=side)
    os.close(side)
    out = b""
    while True:
        try:
            got = os.read(main, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not got:
            break
        out += got
    os.close(main)
    assert proc.wait(timeout=120) == 0, out
    return out.decode("utf-8", "replace")


def test_the_chat_model_hint_is_shown_on_a_terminal_once_a_day(indexed: Repo) -> None:
    """Without a chat model the citations come alone; the GITRAG_CHAT_MODEL hint is shown on a
    terminal, once a day per GITRAG_HOME (a marker in its state folder), never into a pipe."""
    import os
    import subprocess
    import sys

    from gitrag import config

    piped = subprocess.run([sys.executable, "-m", "gitrag", "ask", "send_message retries", "--repo",
                            str(indexed.path)], capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
    assert " 1. app/transport.py:" in piped.stdout and "GITRAG_CHAT_MODEL" not in piped.stdout + piped.stderr
    first = _on_a_terminal(indexed, "send_message retries RETRY_LIMIT")
    assert "app/transport.py:" in first and first.count("hint: set GITRAG_CHAT_MODEL") == 1
    assert "GITRAG_CHAT_MODEL" not in _on_a_terminal(indexed, "send_message retries")  # shown today already
    marker = config.state_dir() / "chat-model-hint"
    day_ago = marker.stat().st_mtime - 25 * 3600
    os.utime(marker, (day_ago, day_ago))
    assert "hint: set GITRAG_CHAT_MODEL" in _on_a_terminal(indexed, "send_message retries")  # a day later


def test_without_chat_model_citations_and_no_hint_off_a_terminal(indexed: Repo) -> None:
    res = _ask(indexed, "send_message retries RETRY_LIMIT")
    assert res.exit_code == 0 and " 1. app/transport.py:" in res.stdout
    assert "GITRAG_CHAT_MODEL" not in res.stderr + res.stdout  # CliRunner's streams are no terminal
    res = _ask(indexed, "send_message retries RETRY_LIMIT", "--json")
    data = json.loads(res.stdout)
    assert data["answer"] is None and data["citations"] == {"kept": [], "dropped": []} and res.stderr == ""
    assert "GITRAG_CHAT_MODEL" not in _ask(indexed, "send_message", "--no-answer").stderr


def test_no_answer_never_calls_the_model(indexed: Repo, stub: OllamaStub) -> None:
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    data = json.loads(_ask(indexed, "send_message retries", "--no-answer", "--json", env=env).stdout)
    assert data["answer"] is None and not [r for r in stub.requests if r.path == "/api/chat"]


# -- units -------------------------------------------------------------------------------------


def _result(path: str, start: int, lines: int, score: float, width: int = 40) -> Result:
    snippet = "\n".join(f"line {start + i} " + "x" * width for i in range(lines))
    return Result(path, start, start + lines - 1, f"sym{start}", "function", "python", score, snippet)


def test_evidence_budget_drops_lowest_ranked_and_truncates_long_snippets() -> None:
    results = [_result("a.py", 1, 400, 0.03)] + [_result(f"m{i}.py", 10, 30, 0.03 - i * 0.001) for i in range(1, 12)]
    ev = select_evidence(results, budget=3000)
    assert sum(e.tokens for e in ev) <= 3000
    assert ev[0].truncated and ev[0].path == "a.py" and ev[0].tokens <= 1500
    assert ev[0].end_line < 400 and ev[0].body.splitlines()[-1].lstrip().startswith(f"{ev[0].end_line}|")
    kept = [e.path for e in ev]
    assert kept == ["a.py"] + [f"m{i}.py" for i in range(1, len(kept))]  # a prefix of the ranking
    assert len(kept) < len(results)
    assert [e.n for e in ev] == list(range(1, len(ev) + 1))
    assert all(e.tokens == count_tokens(e.render()) for e in ev)


def test_evidence_header_and_line_numbers() -> None:
    ev = select_evidence([_result("pkg/x.py", 7, 3, 0.03, width=2)])
    assert isinstance(ev[0], Evidence)
    assert ev[0].render().splitlines()[:3] == ["[1] pkg/x.py:7-9 sym7", "```python", "7| line 7 xx"]


def test_citation_rules() -> None:
    results = [Result("src/core.py", 10, 40, "Core", "class", "python", 0.03), Result("Makefile", 1, 9, "", "window", "text", 0.02)]
    text = ("Core runs (src/core.py:12-15) and `src/core.py:40`, Makefile:3 builds; "
            "not src/core.py:41-50 nor [src/other.py:1, src/core.py:9-11]; "
            "servers at localhost:8080 and http://example.com:443 at 10:30 stay.")
    clean, kept, dropped = check_citations(text, results)
    assert clean == ("Core runs (src/core.py:12-15) and `src/core.py:40`, Makefile:3 builds; "
                     "not nor [src/core.py:9-11]; servers at localhost:8080 and http://example.com:443 at 10:30 stay.")
    assert [c.text for c in kept] == ["src/core.py:12-15", "src/core.py:40", "Makefile:3", "src/core.py:9-11"]
    assert sorted(c.text for c in dropped) == ["src/core.py:41-50", "src/other.py:1"]


def test_streamed_cleaning_equals_whole_text_cleaning() -> None:
    results = [Result("src/core.py", 10, 40, "Core", "class", "python", 0.03)]
    text = ("Core (src/core.py:12-15, bad.py:1) is used\n\n- item (see `f(a[1])`) ok (src/core.py:99)\n"
            "  then src/core.py:20 and gone.py:3-4. End [x] (y)")
    whole = check_citations(text, results)[0]
    rng = random.Random(7)
    for _ in range(200):
        filt, out, i = CitationFilter(results), [], 0
        while i < len(text):
            n = rng.randint(1, 9)
            out.append(filt.feed(text[i : i + n]))
            i += n
        out.append(filt.finish())
        assert "".join(out) == whole


def test_strength_rules() -> None:
    def rs(*scores: float) -> list[Result]:
        return [Result("a.py", i, i, "", "", "", s) for i, s in enumerate(scores, 1)]

    assert evidence_strength([], "hybrid").weak
    assert evidence_strength(rs(0.5 + 0.2, 0.4), "hybrid").weak  # found by one list only (+ coherence)
    assert not evidence_strength(rs(0.5 + 0.4, 0.5), "hybrid").weak  # found well by both lists
    assert not evidence_strength(rs(3.0, 0.9), "hybrid", "where is `Greeter.greet`").weak  # a definition
    assert evidence_strength(rs(0.25, 0.2), "hybrid", "? !").weak  # a termless question: only dense ran (cosines)
    assert not evidence_strength(rs(0.45, 0.2), "hybrid", "? !").weak
    assert evidence_strength(rs(0.25, 0.2), "dense").weak
    assert not evidence_strength(rs(0.55, 0.4), "dense").weak
    assert evidence_strength(rs(*[0.5] * 10), "dense").weak  # flat
    assert evidence_strength(rs(1.5), "sparse").weak and not evidence_strength(rs(9.0), "sparse").weak


def test_snippets_sent_come_from_the_index(indexed: Repo, stub: OllamaStub, tmp_path: Path) -> None:
    """With ``--committed`` the evidence is read from git blobs: an uncommitted edit never
    reaches the model. By default the work-tree overlay answers with the edited file as it
    is on disk (gitrag.query.worktree), and that text is what the model is shown."""
    indexed.write("app/transport.py", TRANSPORT.replace("RETRY_LIMIT = 5", "RETRY_LIMIT = 99  # SECRET"))
    stub.chat_reply = "ok"
    env = {"GITRAG_CHAT_MODEL": "llama3.2", "GITRAG_OLLAMA_HOST": stub.url}
    assert _ask(indexed, "send_message retries RETRY_LIMIT", "--json", "--committed", env=env).exit_code == 0
    chat = [r for r in stub.requests if r.path == "/api/chat"][0]
    assert "SECRET" not in chat.body["messages"][-1]["content"]
    assert "RETRY_LIMIT = 5" in chat.body["messages"][-1]["content"]
    assert _ask(indexed, "send_message retries RETRY_LIMIT", "--json", env=env).exit_code == 0
    overlaid = [r for r in stub.requests if r.path == "/api/chat"][1]
    assert "RETRY_LIMIT = 99  # SECRET" in overlaid.body["messages"][-1]["content"]


def test_answer_arrives_in_pieces(indexed: Repo, stub: OllamaStub) -> None:
    """write_answer hands the text on as the stream arrives, not once at the end."""
    from gitrag.config import load_settings
    from gitrag.query.answer import write_answer
    from gitrag.query.retrieval import search

    stub.chat_reply = "one two three four five six seven eight"
    with open_workspace(indexed.path) as ws:
        results = search(ws, "send_message retries RETRY_LIMIT")
    settings = replace(load_settings(indexed.path), chat_model="llama3.2", ollama_host=stub.url)
    pieces: list[str] = []
    written = write_answer(settings, "send_message retries RETRY_LIMIT", results, "hybrid", on_text=pieces.append)
    assert written.text == "one two three four five six seven eight" and len(pieces) > 3
