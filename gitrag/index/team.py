"""A team's shared index on a Qdrant server: identity, names, the server, the writer's lease.

**Identity.** The local index is keyed by a random id per clone (gitrag.identity); a team
needs an id every clone of one repository agrees on: ``team_repo_id`` from the user
config or ``GITRAG_TEAM_REPO_ID`` when set, else the first 16 hex of SHA-256 of the
repository's root commit (the oldest parentless commit reachable from HEAD; the smallest id
when there are several) and its normalised ``origin`` URL (:func:`normalise_remote`:
``git@github.com:o/r.git``, ``https://user@github.com/o/r`` and ``ssh://git@github.com:22/o/r/``
are all ``github.com/o/r``). A fork (another remote) gets another id; two clones of one
remote agree.

**Names.** ``gitrag_<team id>_<embedder 8 hex>_<pipeline 8 hex>`` holds the points (the
embedder fingerprint and gitrag.index.indexer.PIPELINE_VERSION hashed), so repositories,
embedders and pipeline versions never mix; ``<that>_meta`` holds the records
(gitrag.index.store.meta): the lease, branch records and manifests, symbol graphs, the
publish journal.

**Lease.** One writer per team collection: the record ``lease`` names its owner (host,
pid, a random token) and an expiry (``team_lease_seconds``, renewed while it writes). A
writer takes a lease that is missing, expired, or held by a process of its own host that
is gone; it writes its own, waits SETTLE seconds and reads it back: still its token, it
holds the lease (a server has no compare-and-set; two writers writing within SETTLE of
each other both read the later one's token, so only one goes on). Before its publish
commits, a writer checks that it still holds the lease. Anything else: :class:`TeamBusy`
(one line), or a wait when asked.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitrag.config import Settings
from gitrag.errors import ConfigError, TeamBusy
from gitrag.git.repo import GitRepo
from gitrag.index.store.meta import MetaCollection, record_id
from gitrag.index.store.server import ServerStore

LEASE = record_id("lease")
SETTLE = 0.3  # seconds between writing a lease and reading it back
POLL = 1.0  # seconds between looks at a busy lease while waiting
CONNECT_TIMEOUT = 10  # seconds for one request to the team server
_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_ROOT_FILE = "team-root"  # in the data folder: the root commit, found once (a walk of the history)


def normalise_remote(url: str) -> str:
    """``host/path`` of a git remote URL, lower-case host, no user, port, scheme, ``.git`` or
    trailing slash; a local path stays a path (``""`` for none)."""
    u = url.strip()
    if not u:
        return ""
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d*)?(/.*)?$", u)
    if m is None:
        m = re.match(r"^(?:[^@/]+@)?([^/:]+):(?!//)(.*)$", u)  # scp-like: git@host:owner/repo
        if m is None or u.startswith("/") or (len(u) > 1 and u[1] == ":"):  # a path (C:\ too)
            return u.rstrip("/").removesuffix(".git").rstrip("/")
    host, path = m.group(1).lower(), (m.group(2) or "").strip("/")
    if u.lower().startswith("file://"):
        return "/" + path.removesuffix(".git").rstrip("/")
    path = path.removesuffix(".git").rstrip("/")
    return f"{host}/{path}" if path else host


def root_commit(repo: GitRepo, data_dir: Path | None = None) -> str:
    """The oldest parentless commit reachable from HEAD (the smallest id among several),
    remembered in ``data_dir`` (a root commit stays one). Raises EmptyRepository."""
    head = repo.require_head()
    cached = data_dir / _ROOT_FILE if data_dir is not None else None
    if cached is not None:
        try:
            text = cached.read_text().strip()
            if text and repo.has_commit(text):
                return text
        except OSError:
            pass
    root = repo.root_commits(head)[0]
    if cached is not None:
        try:
            cached.write_text(root + "\n")
        except OSError:
            pass
    return root


def remote_url(repo: GitRepo) -> str:
    """``origin``'s URL, else the first remote's (sorted by name), else ``""``."""
    remotes = repo.remotes()
    if "origin" in remotes:
        return remotes["origin"]
    return remotes[sorted(remotes)[0]] if remotes else ""


def team_id(repo: GitRepo, settings: Settings, data_dir: Path | None = None) -> str:
    """The repository's team id (see the module doc). Raises ConfigError for a
    ``team_repo_id`` that is not 1-40 of ``[A-Za-z0-9_-]``, and for a shallow clone
    without one (its root commit is not the repository's)."""
    if settings.team_repo_id:
        if not _ID.match(settings.team_repo_id):
            raise ConfigError(f"team_repo_id {settings.team_repo_id!r} must be 1-40 letters, digits, '_' or '-'")
        return settings.team_repo_id
    if repo.is_shallow:  # its oldest commit is a cut, not the repository's root: another id
        raise ConfigError("this clone is shallow, so its root commit is not the repository's and its team id would "
                          "differ from every full clone's: fetch the whole history (CI: fetch-depth 0) or set "
                          "GITRAG_TEAM_REPO_ID (team_repo_id)")
    key = f"{root_commit(repo, data_dir)}\n{normalise_remote(remote_url(repo))}"
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def collection_name(team: str, fingerprint: str, pipeline: str) -> str:
    """``gitrag_<team id>_<embedder 8 hex>_<pipeline 8 hex>``: the team's points collection."""
    fp = hashlib.sha256(fingerprint.encode()).hexdigest()[:8]
    pipe = hashlib.sha256(pipeline.encode()).hexdigest()[:8]
    return f"gitrag_{team}_{fp}_{pipe}"


def open_server(settings: Settings) -> ServerStore:
    """The team server's client (``team_url``, ``team_api_key``, ``team_ca_cert``). Raises
    StoreError (one line naming GITRAG_TEAM_URL) when qdrant-client refuses the address."""
    if settings.team_ca_cert:
        import ssl

        if not Path(settings.team_ca_cert).is_file():
            raise ConfigError(f"team_ca_cert {settings.team_ca_cert!r} is not a file; give the PEM bundle of your CA")
        try:
            ssl.create_default_context(cafile=settings.team_ca_cert)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"team_ca_cert {settings.team_ca_cert!r} is not a PEM CA bundle ({exc}); give the PEM "
                              f"bundle of the CA that signed the server's certificate") from None
    store = ServerStore(settings.team_url, api_key=settings.team_api_key or None,
                        ca_cert=settings.team_ca_cert or None, timeout=CONNECT_TIMEOUT)
    store.url_var, store.key_var = "GITRAG_TEAM_URL (team_url)", "GITRAG_TEAM_API_KEY (team_api_key)"
    return store


# -- the lease -----------------------------------------------------------------------------

@dataclass
class Lease:
    """A held lease: its record and, when it replaced another writer's, that one's record."""

    token: str
    record: dict[str, Any]
    took_over: dict[str, Any] | None = None


def _alive(record: dict[str, Any]) -> bool:
    """False only when the record's writer is a process of this host that is gone."""
    if record.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(record.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError, TypeError):
        return True
    return True


def _free(record: dict[str, Any] | None, now: float) -> bool:
    return record is None or float(record.get("expires", 0)) < now or not _alive(record)


def describe(record: dict[str, Any], now: float | None = None) -> str:
    """``host pid N, lease for 42 more s``: who holds a lease."""
    left = float(record.get("expires", 0)) - (time.time() if now is None else now)
    return f"{record.get('host', '?')} pid {record.get('pid', '?')}, lease for {max(0, round(left))} more s"


def acquire(meta: MetaCollection, seconds: float, wait: float = 0.0,
            notice: Callable[[str], None] | None = None) -> Lease:
    """Take the lease for ``seconds`` (see the module doc), waiting at most ``wait`` seconds
    for a busy one (``notice`` gets one line when the wait starts). Raises TeamBusy."""
    token = secrets.token_hex(8)
    deadline = time.monotonic() + max(0.0, wait)
    told = False
    while True:
        now = time.time()
        held = meta.get_one(LEASE)
        if _free(held, now):
            mine = {"kind": "lease", "token": token, "host": socket.gethostname(), "pid": os.getpid(),
                    "started": now, "expires": now + seconds}
            meta.put({LEASE: mine})
            time.sleep(SETTLE)
            back = meta.get_one(LEASE)
            if back is not None and back.get("token") == token:
                return Lease(token, mine, held if held is not None else None)
            held = back
        assert held is not None
        if time.monotonic() >= deadline:
            raise TeamBusy(f"another writer is publishing to {meta.name.removesuffix('_meta')} ({describe(held)}); "
                           f"try again later, or pass --wait SECONDS to wait for it")
        if not told and notice is not None:
            notice(f"another writer is publishing ({describe(held)}); waiting")
            told = True
        time.sleep(min(POLL, max(0.05, deadline - time.monotonic())))


def renew(meta: MetaCollection, lease: Lease, seconds: float) -> None:
    """Extend a held lease to ``seconds`` from now; TeamBusy when it is no longer ours."""
    check(meta, lease)
    lease.record = {**lease.record, "expires": time.time() + seconds}
    meta.put({LEASE: lease.record})


def check(meta: MetaCollection, lease: Lease) -> None:
    """TeamBusy when the lease is not ``lease``'s any more (it expired and another took it)."""
    now = meta.get_one(LEASE)
    if now is None or now.get("token") != lease.token:
        who = describe(now) if now is not None else "nobody"
        raise TeamBusy(f"this publish lost its lease on {meta.name.removesuffix('_meta')} (now: {who}); "
                       f"nothing it wrote is published; the next publish repairs it (raise team_lease_seconds)")


def release(meta: MetaCollection, lease: Lease) -> None:
    """Give the lease back (only if it is still ours)."""
    now = meta.get_one(LEASE)
    if now is not None and now.get("token") == lease.token:
        meta.delete([LEASE])
