"""A team's shared index (issue 25, docs/team.md): identity, publish, readers, the lease.

Against qdrant-client's local mode (``path:``: the only server stand-in here), with real
git clones in tmp dirs and one GITRAG_HOME per clone. Local mode's folder admits one client
process at a time, so the publisher and the reader take turns, and the two writers at once
share one client in one process (two threads)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gitrag import config
from gitrag.errors import ConfigError, TeamBusy
from gitrag.index import publish, team
from gitrag.index.embedders.hashing import HashEmbedder
from gitrag.index.indexer import Indexer
from gitrag.index.store.meta import MetaCollection
from gitrag.index.workspace import open_workspace
from gitrag.query import retrieval
from gitrag.query import team as team_query
from tests.gitutil import Repo

REPO_ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["where are sessions created", "parse_header", "how is the retry delay computed", "Router.add_route"]

FILES = {
    "src/proj/sessions.py": (
        "class Session:\n    \"\"\"A client session.\"\"\"\n\n    def __init__(self, url):\n        self.url = url\n\n"
        "    def close(self):\n        return None\n\n\ndef create_session(url):\n    return Session(url)\n"),
    "src/proj/headers.py": (
        "def parse_header(line):\n    name, _, value = line.partition(':')\n    return name.strip(), value.strip()\n\n\n"
        "def format_header(name, value):\n    return f'{name}: {value}'\n"),
    "src/proj/retry.py": (
        "import time\n\n\ndef retry_delay(attempt, base=0.5):\n    \"\"\"Exponential backoff delay.\"\"\"\n"
        "    return base * 2 ** attempt\n\n\ndef sleep_for(attempt):\n    time.sleep(retry_delay(attempt))\n"),
    "src/proj/routing.py": (
        "class Router:\n    def __init__(self):\n        self.routes = {}\n\n    def add_route(self, path, handler):\n"
        "        self.routes[path] = handler\n\n    def match(self, path):\n        return self.routes.get(path)\n"),
    "README.md": "# proj\n\nA small project with sessions, headers, retries and routing.\n",
}


class Counter:
    """Counts the texts the hash embedder embeds (documents) and the questions it embeds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.documents = 0
        self.queries = 0
        docs, query = HashEmbedder.embed_documents, HashEmbedder.embed_query

        def embed_documents(emb: HashEmbedder, texts: list[str]) -> Any:
            self.documents += len(texts)
            return docs(emb, texts)

        def embed_query(emb: HashEmbedder, text: str) -> Any:
            self.queries += 1
            return query(emb, text)

        monkeypatch.setattr(HashEmbedder, "embed_documents", embed_documents)
        monkeypatch.setattr(HashEmbedder, "embed_query", embed_query)


@pytest.fixture
def team_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An origin with two commits, two clones (their remotes spelled two ways), a home
    each, and a local-mode server folder."""
    origin = Repo(tmp_path / "origin")
    for rel, text in FILES.items():
        origin.write(rel, text)
    origin.commit("first")
    origin.write("src/proj/headers.py", FILES["src/proj/headers.py"] + "\n\ndef header_names(lines):\n"
                 "    return [parse_header(x)[0] for x in lines]\n")
    origin.commit("second")
    clones = []
    for name, url in (("alice", "git@example.invalid:team/proj.git"), ("bob", "https://ci@example.invalid/team/proj/")):
        subprocess.run(["git", "clone", "-q", str(origin.path), str(tmp_path / name)], check=True, capture_output=True)
        clone = Repo.__new__(Repo)
        clone.path = tmp_path / name
        clone.git("config", "commit.gpgsign", "false")
        clone.git("remote", "set-url", "origin", url)
        clones.append(clone)
    server = f"path:{tmp_path / 'qdrant'}"
    monkeypatch.setenv("GITRAG_TEAM_URL", server)
    monkeypatch.setenv("GITRAG_TEAM_LEASE_SECONDS", "60")
    return {"origin": origin, "writer": clones[0], "reader": clones[1], "server": server,
            "homes": (tmp_path / "home-writer", tmp_path / "home-reader"), "tmp": tmp_path}


def _as(monkeypatch: pytest.MonkeyPatch, home: Path, role: str = "reader") -> config.Settings:
    monkeypatch.setenv("GITRAG_HOME", str(home))
    monkeypatch.setenv("GITRAG_TEAM_ROLE", role)
    return config.load_settings()


def _publish(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, clone: Repo | None = None,
             **kw: Any) -> publish.PublishSummary:
    settings = _as(monkeypatch, env["homes"][0], "writer")
    ws = open_workspace((clone or env["writer"]).path)
    server = team.open_server(settings)
    try:
        Indexer(ws).sync()
        return publish.publish(ws, server, settings, **kw)
    finally:
        server.close()
        ws.close()


def _answers(response: Any) -> list[tuple[str, int, int, str, str, float]]:
    """The results as (path, lines, symbol, snippet, score). Scores are rounded to 3 places:
    the embedded store ranks float16 vectors and a Qdrant server the same vectors normalised
    again in float32 (cosine collections normalise on upsert), so cosines differ by ~1e-4."""
    return [(r.path, r.start_line, r.end_line, r.symbol, r.snippet, round(r.score, 3)) for r in response.results]


def _local_answers(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    _as(monkeypatch, env["homes"][0], "writer")
    ws = open_workspace(env["writer"].path)
    try:
        return {q: _answers(retrieval.ask(ws, q, k=5)) for q in QUESTIONS}
    finally:
        ws.close()


def _team_ask(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, question: str, clone: Repo | None = None,
              **kw: Any) -> tuple[Any, list[str]]:
    settings = _as(monkeypatch, env["homes"][1])
    notices: list[str] = []
    ws = open_workspace((clone or env["reader"]).path)
    try:
        kw.setdefault("k", 5)
        return team_query.ask(ws, settings, question, notices.append, **kw), notices
    finally:
        ws.close()


def _server_ids(env: dict[str, Any], collection: str, tag: str | None) -> set[str]:
    from gitrag.index.store.server import ServerStore

    store = ServerStore(env["server"])
    try:
        return store.ids(collection, branch=tag)
    finally:
        store.close()


# -- identity ----------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["git@github.com:Team/Proj.git", "https://github.com/Team/Proj",
                                 "https://user:pw@GitHub.com/Team/Proj.git/", "ssh://git@github.com:22/Team/Proj.git",
                                 "git://github.com/Team/Proj"])
def test_remote_spellings_normalise_alike(url: str) -> None:
    assert team.normalise_remote(url) == "github.com/Team/Proj"


def test_two_clones_agree_on_the_team_id_and_a_fork_does_not(team_env: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from gitrag.git.repo import GitRepo

    settings = config.load_settings()
    a, b = (team.team_id(GitRepo(c.path), settings) for c in (team_env["writer"], team_env["reader"]))
    assert a == b and len(a) == 16
    team_env["reader"].git("remote", "set-url", "origin", "https://example.invalid/someone-else/proj.git")
    assert team.team_id(GitRepo(team_env["reader"].path), settings) != a
    monkeypatch.setenv("GITRAG_TEAM_REPO_ID", "proj-main")
    assert team.team_id(GitRepo(team_env["reader"].path), config.load_settings()) == "proj-main"
    monkeypatch.setenv("GITRAG_TEAM_REPO_ID", "no spaces/allowed")
    with pytest.raises(ConfigError):
        team.team_id(GitRepo(team_env["reader"].path), config.load_settings())
    shallow = team_env["tmp"] / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{team_env['origin'].path}", str(shallow)],
                   check=True, capture_output=True)
    monkeypatch.delenv("GITRAG_TEAM_REPO_ID")
    with pytest.raises(ConfigError, match="shallow.*GITRAG_TEAM_REPO_ID"):
        team.team_id(GitRepo(shallow), config.load_settings())
    name = team.collection_name(a, "hash-fp", "pipe-1")
    assert name.startswith(f"gitrag_{a}_") and name != team.collection_name(a, "hash-fp", "pipe-2") \
        and name != team.collection_name(a, "other-fp", "pipe-1")


def test_a_repository_file_cannot_point_at_a_team_server(team_env: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITRAG_TEAM_URL")
    team_env["reader"].write(".gitrag.toml", 'team_url = "https://evil.invalid:6333"\nteam_role = "writer"\n')
    settings = config.load_settings(team_env["reader"].path)
    assert settings.team_url == "" and settings.team_role == "reader"
    monkeypatch.setenv("GITRAG_TEAM_ROLE", "admin")
    with pytest.raises(ConfigError, match="reader, writer"):
        config.load_settings()


# -- publish and read --------------------------------------------------------------------

def test_a_second_clone_answers_from_the_server_identically_without_embedding(
        team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    done = _publish(team_env, monkeypatch)
    assert done.points > 0 and done.points_upserted == done.points and done.generation == 1
    want = _local_answers(team_env, monkeypatch)
    count = Counter(monkeypatch)
    for q in QUESTIONS:
        got, notices = _team_ask(team_env, monkeypatch, q)
        assert notices == [] and got is not None
        assert _answers(got) == want[q], q
        assert got.team["published_commit"] == team_env["writer"].head() and got.team["commits_ahead"] == 0
        assert got.freshness.commit == got.freshness.head
    assert count.documents == 0  # nothing embedded but the questions
    assert count.queries == len(QUESTIONS)
    # the reader indexed nothing of its own: its home holds no local collection
    assert not list((team_env["homes"][1] / "data").glob("*/qdrant/g*"))
    # a second ask copies nothing again (the published generation is unchanged)
    got, _ = _team_ask(team_env, monkeypatch, QUESTIONS[0])
    assert got.team["pulled_paths"] == 0


def test_a_republish_writes_only_the_difference_and_readers_follow(team_env: dict[str, Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    first = _publish(team_env, monkeypatch)
    _team_ask(team_env, monkeypatch, QUESTIONS[0])  # the reader's copy at generation 1
    w = team_env["writer"]
    w.write("src/proj/retry.py", FILES["src/proj/retry.py"].replace("base * 2 ** attempt", "min(30, base * 3 ** attempt)"))
    w.git("rm", "-q", "README.md")
    w.commit("tune retry")
    second = _publish(team_env, monkeypatch)
    assert second.generation == 2 and second.previous_commit == first.commit
    assert 0 < second.points_upserted < first.points and second.points_deleted > 0
    tag = publish.branch_tag("main")
    settings = _as(monkeypatch, team_env["homes"][0], "writer")
    ws = open_workspace(w.path)
    try:
        local = {r.point_id for r in ws.state.points("main")}
    finally:
        ws.close()
    assert _server_ids(team_env, second.collection, tag) == local
    team_env["reader"].git("pull", "-q", str(team_env["writer"].path), "main")
    got, _ = _team_ask(team_env, monkeypatch, "retry delay")
    assert got.team["generation"] == 2 and 0 < got.team["pulled_paths"] <= 2
    assert all(r.path != "README.md" for r in got.results)
    assert "3 ** attempt" in next(r.snippet for r in got.results if r.path == "src/proj/retry.py")
    del settings


def test_a_reader_with_unpublished_commits_answers_from_the_server_and_its_overlay(
        team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _publish(team_env, monkeypatch)
    r = team_env["reader"]
    r.write("src/proj/quota.py", "def unpublished_quota_limit(user):\n    return 42 if user else 0\n")
    r.write("src/proj/headers.py", "def parse_header(line):\n    return tuple(line.split('=', 1))\n")
    r.commit("local work")
    got, notices = _team_ask(team_env, monkeypatch, "unpublished_quota_limit")
    assert notices == []
    assert got.results[0].path == "src/proj/quota.py" and got.results[0].source == "worktree"
    assert got.team["commits_ahead"] == 1 and got.team["local_overlay"] is True
    assert got.freshness.commit == team_env["writer"].head() and got.freshness.head == r.head()
    assert got.to_json()["team"]["commits_ahead"] == 1
    hdr, _ = _team_ask(team_env, monkeypatch, "parse_header")
    header_hits = [x for x in hdr.results if x.path == "src/proj/headers.py"]
    assert header_hits and all(x.source == "worktree" for x in header_hits)  # the published version is hidden
    assert "split('='" in header_hits[0].snippet


def test_an_unreachable_server_is_one_line_and_the_local_index_answers(team_env: dict[str, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRAG_TEAM_URL", "http://127.0.0.1:9")
    got, notices = _team_ask(team_env, monkeypatch, QUESTIONS[0])
    assert got is None and len(notices) == 1 and "\n" not in notices[0]
    assert "team server not used" in notices[0] and "GITRAG_TEAM_URL" in notices[0]
    assert "answering from the local index" in notices[0]
    # the CLI: that line on stderr, then the local index's answer (exit 0)
    cli_env = {**os.environ, "GITRAG_HOME": str(team_env["homes"][1])}
    subprocess.run([sys.executable, "-m", "gitrag", "index", "--repo", str(team_env["reader"].path)], env=cli_env,
                   check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "gitrag", "ask", "--no-answer", "--json", "--repo",
                           str(team_env["reader"].path), "parse_header"], env=cli_env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"team": null' in proc.stdout and "src/proj/headers.py" in proc.stdout
    assert sum("team server not used" in line for line in proc.stderr.splitlines()) == 1


def test_nothing_published_falls_back_in_one_line(team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    got, notices = _team_ask(team_env, monkeypatch, QUESTIONS[0])
    assert got is None and len(notices) == 1 and "nothing is published" in notices[0]


def test_a_shallow_reader_falls_back_in_one_line(team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    _publish(team_env, monkeypatch)
    shallow = Repo.__new__(Repo)
    shallow.path = team_env["tmp"] / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{team_env['origin'].path}", str(shallow.path)],
                   check=True, capture_output=True)
    got, notices = _team_ask(team_env, monkeypatch, "parse_header", clone=shallow)
    assert got is None and len(notices) == 1 and "shallow" in notices[0] and "local index" in notices[0]


def test_a_reader_role_cannot_publish(team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    cli_env = {**os.environ, "GITRAG_HOME": str(team_env["homes"][1]), "GITRAG_TEAM_ROLE": "reader"}
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--publish", "--repo", str(team_env["reader"].path)],
                          env=cli_env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "GITRAG_TEAM_ROLE=writer" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- one writer at a time ----------------------------------------------------------------

def test_two_writers_at_once_one_refuses_in_one_line_and_nothing_is_corrupted(
        team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clones publish at the same moment through one client (local mode admits one
    process): exactly one publishes, the other refuses with one line; then with --wait
    both publish, one after the other."""
    other = team_env["reader"]
    other.git("checkout", "-q", "-b", "feature")
    other.write("src/proj/feature.py", "def feature_flag(name):\n    return name.startswith('ff_')\n")
    other.commit("feature")
    settings = _as(monkeypatch, team_env["homes"][0], "writer")
    wa = open_workspace(team_env["writer"].path)
    Indexer(wa).sync()
    monkeypatch.setenv("GITRAG_HOME", str(team_env["homes"][1]))
    wb = open_workspace(other.path)
    Indexer(wb).sync()
    server = team.open_server(settings)
    try:
        for wait in (0.0, 60.0):
            start = threading.Barrier(2)
            outcome: dict[str, Any] = {}

            def run(name: str, ws: Any, wait: float = wait, start: threading.Barrier = start,
                    outcome: dict[str, Any] = outcome) -> None:
                start.wait()
                try:
                    outcome[name] = publish.publish(ws, server, settings, wait=wait)
                except TeamBusy as exc:
                    outcome[name] = exc

            threads = [threading.Thread(target=run, args=("main", wa)), threading.Thread(target=run, args=("feature", wb))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            busy = [v for v in outcome.values() if isinstance(v, TeamBusy)]
            if wait == 0.0:
                assert len(busy) == 1, outcome
                assert "another writer is publishing" in str(busy[0]) and "\n" not in str(busy[0])
                assert "--wait" in str(busy[0])
            else:
                assert busy == [], outcome
        coll = next(v.collection for v in outcome.values())
        for ws, name in ((wa, "main"), (wb, "feature")):
            want = {r.point_id for r in ws.state.points(name)}
            assert server.ids(coll, branch=publish.branch_tag(name)) == want
        meta = MetaCollection(server, coll)
        assert meta.find(kind="journal") == {} and meta.get_one(team.LEASE) is None
    finally:
        server.close()
        wa.close()
        wb.close()


_KILLED_WRITER = """
import sys, time
from gitrag import config
from gitrag.index import publish, team
from gitrag.index.indexer import Indexer
from gitrag.index.store import server as server_mod
from gitrag.index.workspace import open_workspace

real = server_mod.ServerStore.upsert
def upsert(self, name, points):
    real(self, name, points)
    if not name.endswith("_meta"):
        print("UPSERTED", flush=True)
        time.sleep(600)
server_mod.ServerStore.upsert = upsert
settings = config.load_settings()
ws = open_workspace(sys.argv[1])
Indexer(ws).sync()
publish.publish(ws, team.open_server(settings), settings)
"""


def test_a_writer_killed_mid_publish_is_repaired_by_the_next(team_env: dict[str, Any],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    first = _publish(team_env, monkeypatch)
    _team_ask(team_env, monkeypatch, "retry delay")  # the reader's copy at generation 1
    w = team_env["writer"]
    old_retry = FILES["src/proj/retry.py"]
    w.write("src/proj/retry.py", old_retry.replace("0.5", "0.25") + "\n\ndef jitter():\n    return 0.1\n")
    w.write("src/proj/extra.py", "def extra_helper():\n    return 'extra'\n")
    w.commit("second round")
    env = {**os.environ, "GITRAG_HOME": str(team_env["homes"][0]), "GITRAG_TEAM_ROLE": "writer",
           "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(w.path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "UPSERTED" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "UPSERTED" in line, proc.stderr.read() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # the half-written publish: its new points are on the server, its journal and lease remain
    from gitrag.index.store.server import ServerStore

    store = ServerStore(team_env["server"])
    try:
        meta = MetaCollection(store, first.collection)
        assert meta.find(kind="journal") and meta.get_one(team.LEASE) is not None
        assert meta.get_one(publish.branch_record_id("main"))["commit"] == first.commit
        stray = store.ids(first.collection, branch=publish.branch_tag("main"))
    finally:
        store.close()
    # a reader meanwhile still answers from the last complete publish, also when it asks for
    # more results than there are points (the count check knows a publish is under way)
    got, notices = _team_ask(team_env, monkeypatch, "extra_helper", k=100)
    assert notices == [] and got.team["published_commit"] == first.commit
    assert all(r.path != "src/proj/extra.py" or r.source == "worktree" for r in got.results)
    # the next writer: the retry change reverted, so only the journal says its points are stale
    w.write("src/proj/retry.py", old_retry)
    w.commit("revert retry")
    again = _publish(team_env, monkeypatch)
    assert again.took_over is not None and again.paths_repaired >= 2
    settings = _as(monkeypatch, team_env["homes"][0], "writer")
    ws = open_workspace(w.path)
    try:
        want = {r.point_id for r in ws.state.points("main")}
    finally:
        ws.close()
    ids = _server_ids(team_env, first.collection, publish.branch_tag("main"))
    assert ids == want and stray - want  # the dead writer's points of the reverted file are gone
    store = ServerStore(team_env["server"])
    try:
        meta = MetaCollection(store, first.collection)
        assert meta.find(kind="journal") == {} and len(meta.find(kind="files")) == 1
        assert store.ids(first.collection) == want  # no point outside a published manifest is left
    finally:
        store.close()
    got, _ = _team_ask(team_env, monkeypatch, "retry delay", clone=w)
    assert got.team["commits_ahead"] == 0 and got.team["generation"] == 2
    del settings


def test_mirror_picks_the_nearest_published_branch_for_an_unpublished_one(team_env: dict[str, Any],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _publish(team_env, monkeypatch)
    r = team_env["reader"]
    r.git("checkout", "-q", "-b", "topic")
    got, notices = _team_ask(team_env, monkeypatch, "parse_header")
    assert notices == [] and got.team["published_branch"] == "main" and got.freshness.branch == "topic"
    assert got.results and got.results[0].path == "src/proj/headers.py"



def test_tls_and_the_api_key_reach_qdrant_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The team settings become qdrant-client's https address, ``api-key`` header and the
    CA bundle its HTTP client verifies with (no request is made); a bundle that is no PEM is
    one line naming the setting."""
    ca = tmp_path / "ca.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k.pem"),
                           "-out", str(ca), "-days", "1", "-subj", "/CN=qdrant.test"], capture_output=True)
    if made.returncode != 0:
        pytest.skip("openssl cannot make a certificate here")
    monkeypatch.setenv("GITRAG_TEAM_URL", "https://qdrant.test:6333")
    monkeypatch.setenv("GITRAG_TEAM_API_KEY", "secret-key")
    monkeypatch.setenv("GITRAG_TEAM_CA_CERT", str(ca))
    store = team.open_server(config.load_settings())
    try:
        remote = store._client._client
        assert remote.rest_uri == "https://qdrant.test:6333"
        assert remote._rest_headers["api-key"] == "secret-key"
        import ssl

        verify = remote._rest_args["verify"]
        assert isinstance(verify, ssl.SSLContext) and verify.verify_mode == ssl.CERT_REQUIRED
        assert any(("commonName", "qdrant.test") in rdn for c in verify.get_ca_certs() for rdn in c["subject"])
    finally:
        store.close()
    (tmp_path / "bad.pem").write_text("not a certificate\n")
    monkeypatch.setenv("GITRAG_TEAM_CA_CERT", str(tmp_path / "bad.pem"))
    with pytest.raises(ConfigError, match="team_ca_cert .* is not a PEM CA bundle"):
        team.open_server(config.load_settings())


def test_the_cli_publishes_and_a_second_home_answers_with_the_team_field(team_env: dict[str, Any]) -> None:
    """``gitrag index --publish --json`` in the writer's home, then ``gitrag ask --json`` in
    the reader's: the same ranked results, ``team`` filled in, the freshness line says so."""
    base = {**os.environ, "GITRAG_TEAM_URL": team_env["server"]}
    writer = {**base, "GITRAG_HOME": str(team_env["homes"][0]), "GITRAG_TEAM_ROLE": "writer"}
    reader = {**base, "GITRAG_HOME": str(team_env["homes"][1]), "GITRAG_TEAM_ROLE": "reader"}
    import json

    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--publish", "--json", "--repo",
                           str(team_env["writer"].path)], env=writer, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["publish"]["generation"] == 1 and done["publish"]["points"] == done["chunks_total"]
    proc = subprocess.run([sys.executable, "-m", "gitrag", "index", "--publish", "--repo", str(team_env["writer"].path)],
                          env=writer, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "published main @" in proc.stdout and "0 written" in proc.stdout
    ask = [sys.executable, "-m", "gitrag", "ask", "--no-answer", "--json", "parse_header", "--repo"]
    local = subprocess.run(ask + [str(team_env["writer"].path)], env={**writer, "GITRAG_TEAM_URL": ""},
                           capture_output=True, text=True, timeout=180)
    got = subprocess.run(ask + [str(team_env["reader"].path)], env=reader, capture_output=True, text=True, timeout=180)
    assert local.returncode == 0 and got.returncode == 0, got.stderr
    mine, theirs = json.loads(local.stdout), json.loads(got.stdout)
    assert theirs["team"]["published_commit"] == done["commit"] and mine["team"] is None
    def same(r: dict[str, Any]) -> dict[str, Any]:  # scores to 3 places: see _answers
        return {**r, "score": round(r["score"], 3)}

    assert [same(r) for r in theirs["results"]] == [same(r) for r in mine["results"]]
    text = subprocess.run(ask[:4] + ["parse_header", "--repo", str(team_env["reader"].path)], env=reader,
                          capture_output=True, text=True, timeout=180)
    assert "answered from the team server (main published at" in text.stdout + text.stderr


def test_the_lease_of_another_host_is_waited_for_until_it_expires_then_taken_over() -> None:
    """A live lease of another machine refuses in one line (or is waited for); an expired
    one is taken over (and named); a writer whose lease was taken stops at its check."""
    from gitrag.index.store.server import ServerStore

    store = ServerStore(":memory:")
    try:
        meta = MetaCollection(store, "gitrag_leasetest_00000000_00000000")
        meta.ensure()
        meta.put({team.LEASE: {"kind": "lease", "token": "other", "host": "ci-runner-7", "pid": 1,
                               "expires": time.time() + 1.5}})
        with pytest.raises(TeamBusy, match=r"ci-runner-7 pid 1, lease for \d+ more s.*--wait"):
            team.acquire(meta, 60, wait=0)
        notices: list[str] = []
        t0 = time.monotonic()
        lease = team.acquire(meta, 60, wait=30, notice=notices.append)  # waits out the 1.5 s
        assert 1.0 < time.monotonic() - t0 < 20 and len(notices) == 1 and "waiting" in notices[0]
        assert lease.took_over is not None and lease.took_over["host"] == "ci-runner-7"
        team.check(meta, lease)
        meta.put({team.LEASE: {**lease.record, "token": "thief"}})  # it expired and another writer took it
        with pytest.raises(TeamBusy, match="lost its lease"):
            team.check(meta, lease)
        team.release(meta, lease)  # not ours any more: left alone
        assert meta.get_one(team.LEASE)["token"] == "thief"
    finally:
        store.close()


def test_a_reader_never_writes_to_the_server(team_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """What a read-only API key allows is all a reader does: with every write of the client
    refused, it still answers (its copy, the question and its overlay need reads only)."""
    _publish(team_env, monkeypatch)
    from gitrag.index.store.server import ServerStore

    def refused(*args: Any, **kw: Any) -> None:
        raise AssertionError("a reader wrote to the team server")

    for name in ("create_collection", "drop_collection", "upsert", "delete", "delete_path", "set_payload",
                 "set_payload_of"):
        monkeypatch.setattr(ServerStore, name, refused)
    for name in ("ensure", "put", "delete", "drop"):
        monkeypatch.setattr(MetaCollection, name, refused)
    team_env["reader"].write("src/proj/local.py", "def local_only():\n    return 1\n")
    got, notices = _team_ask(team_env, monkeypatch, "parse_header")
    assert notices == [] and got is not None and got.results[0].path == "src/proj/headers.py"
    assert got.team["local_overlay"] is True


def test_a_detached_ci_checkout_publishes_as_the_branch_it_built(team_env: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    w = team_env["writer"]
    w.git("checkout", "-q", "--detach")
    done = _publish(team_env, monkeypatch, as_branch="main")
    assert done.branch == "main"
    got, notices = _team_ask(team_env, monkeypatch, "parse_header")
    assert notices == [] and got.team["published_branch"] == "main" and got.team["commits_ahead"] == 0
    assert got.results[0].path == "src/proj/headers.py"
    with pytest.raises(ConfigError, match="not a branch name"):
        _publish(team_env, monkeypatch, as_branch="two words")


def test_records_are_written_in_requests_under_the_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big records (a large file's symbol graph) go in several requests, none over the cap."""
    from gitrag.index.store import meta as meta_mod
    from gitrag.index.store.server import ServerStore

    monkeypatch.setattr(meta_mod, "_REQUEST_BYTES", 50_000)
    store = ServerStore(":memory:")
    try:
        meta = MetaCollection(store, "gitrag_sizetest_00000000_00000000")
        meta.ensure()
        sizes: list[int] = []
        real = meta._upsert
        monkeypatch.setattr(meta, "_upsert", lambda points: (sizes.append(len(points)), real(points)))
        records = {meta_mod.record_id("symbols", str(i)): {"kind": "symbols", "data": "x" * 20_000} for i in range(10)}
        meta.put(records)
        assert len(sizes) == 5 and sum(sizes) == 10  # two 20 KB records a request
        assert meta.get(records) == records
    finally:
        store.close()


def test_a_writer_that_loses_its_lease_mid_publish_commits_nothing(team_env: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its lease taken while it writes (it outlived the lease): it stops at the check before
    its commit with one line, the published generation stays, its journal stays, and the
    next publish repairs what it wrote."""
    from gitrag.index.store.server import ServerStore

    first = _publish(team_env, monkeypatch)
    w = team_env["writer"]
    w.write("src/proj/late.py", "def late_arrival():\n    return 'late'\n")
    w.commit("late")
    real = ServerStore.upsert

    def upsert_then_lose(self: ServerStore, name: str, points: list[Any]) -> None:
        real(self, name, points)
        MetaCollection(self, name).put({team.LEASE: {"kind": "lease", "token": "someone-else", "host": "elsewhere",
                                                     "pid": 1, "expires": time.time() + 600}})

    monkeypatch.setattr(ServerStore, "upsert", upsert_then_lose)
    with pytest.raises(TeamBusy, match="lost its lease") as lost:
        _publish(team_env, monkeypatch)
    assert "\n" not in str(lost.value)
    monkeypatch.setattr(ServerStore, "upsert", real)
    store = ServerStore(team_env["server"])
    try:
        meta = MetaCollection(store, first.collection)
        assert meta.get_one(publish.branch_record_id("main"))["gen"] == 1  # nothing published
        assert meta.find(kind="journal")
        assert meta.get_one(team.LEASE)["token"] == "someone-else"  # the other's lease is left alone
        meta.delete([team.LEASE])  # that writer finishes
    finally:
        store.close()
    again = _publish(team_env, monkeypatch)
    assert again.generation == 2 and again.paths_repaired >= 1
    ws = open_workspace(w.path)
    try:
        want = {r.point_id for r in ws.state.points("main")}
    finally:
        ws.close()
    assert _server_ids(team_env, first.collection, None) == want
