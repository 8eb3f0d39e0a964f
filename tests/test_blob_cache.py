"""GitRepo.read_blob_cached: the bytes of the object database, from a bounded LRU."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrag.daemon import memory
from gitrag.git import repo as gitrepo
from gitrag.git.repo import BlobCache, GitRepo
from tests.gitutil import Repo


def test_a_cached_blob_is_the_blob_and_each_repository_reads_its_own(repo: Repo, tmp_path: Path) -> None:
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    git = GitRepo(repo.path)
    blob = git.blob_at(git.require_head(), "a.py")
    assert blob is not None
    gitrepo.blob_cache.cache_clear()
    assert git.read_blob_cached(blob) == git.read_blob(blob) == b"x = 1\n"
    assert git.read_blob_cached(blob) == b"x = 1\n"
    assert gitrepo.blob_cache.cache_info().hits == 1
    other = Repo(tmp_path / "other")
    other.write("b.py", "y = 2\n")
    other.commit("other")
    with pytest.raises(KeyError):  # cached for the first repository, not in this one's object database
        GitRepo(other.path).read_blob_cached(blob)
    with pytest.raises((KeyError, ValueError)):
        git.read_blob_cached("0" * 40)
    assert memory.clear_caches() >= 1  # the daemon's release empties it with the other caches
    assert gitrepo.blob_cache.cache_info().currsize == 0


def test_the_cache_keeps_at_most_its_bytes_and_leaves_large_blobs_out() -> None:
    cache = BlobCache(max_bytes=10, max_blob=6)
    cache.put(("g", "a"), b"12345")
    cache.put(("g", "b"), b"12345")
    assert cache.get(("g", "a")) == b"12345"  # now the most recent
    cache.put(("g", "c"), b"123")
    assert cache.get(("g", "b")) is None and cache.get(("g", "a")) == b"12345" and cache.get(("g", "c")) == b"123"
    cache.put(("g", "d"), b"1234567")
    assert cache.get(("g", "d")) is None
