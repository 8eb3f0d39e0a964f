"""Hostile input on the daemon's socket (issue 8): malformed JSON, oversized messages,
unknown ops, slow-loris connections, another user. Each gets an error reply or a close, and
the daemon keeps serving. The socket is 0600 in a 0700 folder and the daemon checks the
peer's uid (SO_PEERCRED). Property tests of the decoder and the dispatcher (hypothesis).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitrag.daemon import client, protocol
from gitrag.daemon.server import dispatch, serve
from tests.daemonutil import stop_daemon
from tests.gitutil import Repo
from tests.reliability import commit_a, commit_b, lost_wrong, record, start_daemon, sync

GROUP = "socket"
READ_TIMEOUT_S = 2.0  # the daemon's wait for a complete request line, shortened for the test


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[bytes]]:
    proc = start_daemon(prelude={"set": [["gitrag.daemon.server", "READ_TIMEOUT_S", READ_TIMEOUT_S]]})
    yield proc
    stop_daemon(proc)


def _exchange(data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection; everything the daemon sends until it closes."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(str(protocol.socket_path()))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return _read_all(s)


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while data := s.recv(65536):
        chunks.append(data)
    return b"".join(chunks)


def _replies(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.splitlines() if line]


def _still_serving(daemon: subprocess.Popen[bytes]) -> None:
    assert daemon.poll() is None
    assert client.request("ping", timeout=5)["pid"] == daemon.pid


HOSTILE = {
    "malformed JSON": b'{"v": 1, "op": "ping"\n',
    "invalid UTF-8": b"\xff\xfe\xfd\n",
    "a JSON array, not an object": b"[1, 2, 3]\n",
    "100,000 nested brackets": b"[" * 100_000 + b"\n",
    "wrong protocol version": b'{"v": 99, "op": "ping"}\n',
    "unknown op": b'{"v": 1, "op": "rm_rf"}\n',
    "op that is not a name": b'{"v": 1, "op": "../../etc/passwd"}\n',
    "private method as op": b'{"v": 1, "op": "_open"}\n',
    "args not an object": b'{"v": 1, "op": "ask", "args": [1]}\n',
    "unexpected args": b'{"v": 1, "op": "ping", "args": {"evil": true}}\n',
    "a repo that does not exist": b'{"v": 1, "op": "ask", "args": {"repo": "/nonexistent", "question": "x"}}\n',
    "a repo that is not a string": b'{"v": 1, "op": "status", "args": {"repo": 42}}\n',
}


def test_hostile_input_during_a_sync_leaves_the_index_intact(repo: Repo, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every hostile line, an oversized message and stalled connections, sent while the daemon
    syncs: each gets an error reply (or a close), pings keep being answered, and the sync
    ends equal to a from-scratch index."""
    commit_a(repo)
    sync(repo.path)
    commit_b(repo)
    slow = {"sleep": [["gitrag.index.embedders.hashing:HashEmbedder.embed_documents", 0.3]],
            "set": [["gitrag.daemon.server", "READ_TIMEOUT_S", READ_TIMEOUT_S]]}
    daemon = start_daemon(prelude=slow, env={"GITRAG_BATCH_SIZE": "2"})
    kinds: dict[str, str] = {}
    try:
        syncing = threading.Thread(target=lambda: client.request("index", timeout=120, repo=str(repo.path)))
        syncing.start()
        stalled = [_stall(b'{"v": 1, "op": "pi'), _stall(b"")]
        for what in sorted(HOSTILE):
            (reply,) = _replies(_exchange(HOSTILE[what]))
            assert reply["ok"] is False and reply["error"] and reply["exit_code"] in (1, 2, 3), what
            kinds[what] = reply["kind"]
            _still_serving(daemon)
        assert syncing.is_alive()  # all of it landed while the sync ran (it lasts over 3 s)
        (reply,) = _replies(_exchange(b"x" * (protocol.MAX_MESSAGE + 10) + b"\n", timeout=30))
        assert reply["kind"] == "ProtocolError" and "exceeds" in reply["error"]
        for s in stalled:
            assert json.loads(_read_all(s))["kind"] == "ProtocolError"
            s.close()
        syncing.join(120)
        assert _indexed_commit_via_daemon(repo) == repo.head()
    finally:
        assert stop_daemon(daemon) == 0
    lost, wrong = lost_wrong(repo.path, tmp_path, monkeypatch)
    assert (lost, wrong) == (0, 0)
    for what, kind in kinds.items():
        record(what, f"error reply ({kind}); daemon keeps serving", lost, wrong, GROUP)
    record(f"oversized message (> {protocol.MAX_MESSAGE // 2**20} MB)", "error reply, connection closed",
           lost, wrong, GROUP)
    record("stalled connections (half a request, or none)", "told so and closed after the read timeout",
           lost, wrong, GROUP)


def _stall(data: bytes) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(str(protocol.socket_path()))
    s.sendall(data)
    return s


def _indexed_commit_via_daemon(repo: Repo) -> str | None:
    status = client.request("status", timeout=30, repo=str(repo.path))
    return next(b["indexed_commit"] for b in status["repos"][0]["branches"] if b["current"])


def test_many_requests_on_one_connection_are_answered_in_order(daemon: subprocess.Popen[bytes]) -> None:
    lines = b"".join(HOSTILE[w] for w in sorted(HOSTILE)) + protocol.encode(protocol.request("ping", {}))
    replies = _replies(_exchange(lines))
    assert len(replies) == len(HOSTILE) + 1 and replies[-1]["ok"] is True


def test_slow_loris_connections_are_closed_and_others_served(daemon: subprocess.Popen[bytes]) -> None:
    loris = []
    for i in range(20):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10 * READ_TIMEOUT_S)
        s.connect(str(protocol.socket_path()))
        s.sendall(b'{"v": 1, "op": "pi' if i % 2 else b"")  # half a request, or nothing at all
        loris.append(s)
    try:
        t0 = time.monotonic()
        _still_serving(daemon)  # served at once, beside the stalled connections
        assert time.monotonic() - t0 < READ_TIMEOUT_S
        for s in loris:
            got = _read_all(s)  # the daemon gives up on each: an error line, then EOF
            assert not got or json.loads(got)["kind"] == "ProtocolError"
        assert time.monotonic() - t0 < 5 * READ_TIMEOUT_S + 5
    finally:
        for s in loris:
            s.close()
    _still_serving(daemon)


def test_socket_and_folder_are_private(daemon: subprocess.Popen[bytes]) -> None:
    path = protocol.socket_path()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert os.stat(path).st_uid == os.getuid()
    record("socket and folder permissions", "socket 0600, folder 0700, owned by the user", group=GROUP)


# -- another user ------------------------------------------------------------------------------

NOBODY = 65534
_AS_NOBODY = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    try:
        s.connect(sys.argv[1])
    except OSError as exc:
        print("connect:", type(exc).__name__)
        sys.exit(0)
    data = b""  # a refused peer is told so at once, then closed: read before writing
    while chunk := s.recv(65536):
        data += chunk
    print("reply:", data.decode().strip())
""")


@pytest.fixture
def shared_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A GITRAG_HOME another user could reach if the folders let them (pytest's tmp is 0700)."""
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    home = Path(tempfile.mkdtemp(prefix="gitrag-peer-", dir="/tmp"))
    os.chmod(home, 0o711)
    monkeypatch.setenv("GITRAG_HOME", str(home / "g"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _nobody_python() -> str:
    """A Python the other user may run (a venv's may live in root's 0700 home)."""
    for exe in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        try:
            subprocess.run([exe, "-I", "-c", "pass"], user=NOBODY, group=NOBODY, extra_groups=[], check=True,
                           capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        return exe
    pytest.skip("no Python interpreter that another user may run")


def _as_nobody(path: Path, python: str) -> str:
    proc = subprocess.run([python, "-I", "-c", _AS_NOBODY, str(path)], user=NOBODY, group=NOBODY,
                          extra_groups=[], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_another_user_is_refused(shared_home: Path) -> None:
    python = _nobody_python()
    daemon = start_daemon()
    try:
        path = protocol.socket_path()
        assert _as_nobody(path, python) == "connect: PermissionError"  # the 0700 folder stops them
        os.chmod(shared_home / "g", 0o711)
        os.chmod(path.parent, 0o711)  # now open the doors: the uid check must still refuse
        os.chmod(path, 0o666)
        said = _as_nobody(path, python)
        assert said.startswith("reply:") and json.loads(said[len("reply:"):])["kind"] == "PermissionDenied"
        with pytest.raises(client.UntrustedSocket, match="0711"):  # our own client trusts no open folder
            client.request("ping", timeout=5)
        os.chmod(path.parent, 0o700)
        os.chmod(path, 0o600)
        _still_serving(daemon)
    finally:
        stop_daemon(daemon)
    record("another user connects", "no access (0700 folder); with the folder opened, refused by "
           "SO_PEERCRED uid check", group=GROUP)


# -- property tests ------------------------------------------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@settings(deadline=None)  # a loaded CI machine is no failure
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_decode_returns_a_message_or_raises_protocol_error(line: bytes) -> None:
    try:
        message = protocol.decode(line)
    except protocol.ProtocolError:
        return
    assert isinstance(message, dict) and message["v"] == protocol.VERSION


@settings(deadline=None)
@given(st.integers(1, 50_000), st.sampled_from("[{"))
def test_decode_survives_any_nesting(depth: int, bracket: str) -> None:
    try:
        protocol.decode(b'{"v": 1, "x": ' + bracket.encode() * depth)
    except protocol.ProtocolError:
        pass


@settings(deadline=None)
@given(st.text(), st.dictionaries(st.text(), JSON, max_size=5))
def test_encode_then_decode_is_the_identity(op: str, args: dict[str, Any]) -> None:
    message = protocol.request(op, args)
    assert protocol.decode(protocol.encode(message)) == message


class _Echo:
    async def cmd_echo(self, **args: Any) -> Any:
        return args

    async def cmd_fail(self, repo: str) -> Any:
        raise RuntimeError(repo)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200) | JSON.map(lambda j: json.dumps(j).encode())
       | st.builds(lambda op, a: json.dumps({"v": 1, "op": op, "args": a}).encode(),
                   st.sampled_from(["echo", "fail", "nope", "", "__class__"]), JSON))
def test_dispatch_always_answers_one_encodable_reply(line: bytes) -> None:
    reply = asyncio.run(dispatch(_Echo(), line))
    assert reply["v"] == protocol.VERSION and isinstance(reply["ok"], bool)
    assert protocol.decode(protocol.encode(reply)) == reply


class _ServerThread:
    """An in-process socket server on its own event loop, for framing properties."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(serve(_Echo(), self.path))
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self) -> _ServerThread:
        self.thread.start()
        self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("echo") / "run" / "s.sock"
    with _ServerThread(path):
        yield path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=100).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=8),
       st.integers(1, 17))
def test_every_line_gets_exactly_one_reply_however_it_is_split(echo_server: Path, lines: list[bytes],
                                                                piece: int) -> None:
    data = b"".join(line + b"\n" for line in lines)
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(echo_server))
        for i in range(0, len(data), piece):  # the stream arrives in arbitrary pieces
            s.sendall(data[i : i + piece])
        s.shutdown(socket.SHUT_WR)
        replies = _replies(_read_all(s))
    assert len(replies) == len(lines)
    assert all(isinstance(r["ok"], bool) for r in replies)
