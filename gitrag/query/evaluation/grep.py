"""Lexical baselines that rank whole FILES, the way a developer's grep would.

Two rankers over ``(path, text)`` pairs, both returning :class:`Result` objects that
span the whole file (line 1 to the file's line count), best first, files without a
match left out:

- :meth:`GrepBaseline.search` (mode ``grep``): the query is split into words
  (``[A-Za-z0-9_]+``, lower-cased, stop words and words under 3 characters dropped,
  duplicates removed); each word's case-insensitive occurrences are counted per file.
  Score = number of distinct query words found; ties go to the larger total count,
  then to the path (for a stable order).
- :meth:`GrepBaseline.ripgrep` (mode ``ripgrep``): semble's baseline
  (``benchmarks/baselines/ripgrep.py``): ``rg --count --ignore-case --fixed-strings
  QUERY``, i.e. the whole query as one literal, counting matching LINES per file,
  sorted by that count. Upstream keeps rg's output order on ties; we sort by path.
  Case folding is ``str.lower``, close to rg's simple case folding.

Files come from :func:`head_files` (HEAD's tree in the git object database, binary
blobs skipped) or from any iterable of pairs, which keeps the rankers testable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitrag.errors import EmptyRepository, NotARepository
from gitrag.git.repo import decode_path
from gitrag.query.evaluation.metrics import Result

#: git's own heuristic (``buffer_is_binary``) looks for a NUL in the first 8000 bytes.
BINARY_SNIFF_BYTES = 8000
MIN_WORD_LEN = 3
#: English function words and question words; a developer would not grep for them.
STOP_WORDS: frozenset[str] = frozenset(
    """
    the and for are but not nor you all any can had has have her his its our out was
    were been being who whom whose what when where which why how does did doing done
    with from into onto this that these those there their then than them they will
    would should could about also some such only own same other each both more most
    """.split()
)
_WORD = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class _File:
    path: str
    lower: str
    lines: int


def query_words(query: str) -> list[str]:
    """Lower-cased distinct words of ``query`` in order, minus stop words and short words."""
    words: list[str] = []
    for word in _WORD.findall(query.lower()):
        if len(word) >= MIN_WORD_LEN and word not in STOP_WORDS and word not in words:
            words.append(word)
    return words


def line_count(text: str) -> int:
    """Number of lines as an editor shows them; at least 1 so the span stays valid."""
    return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))


class GrepBaseline:
    """File rankers over a fixed set of files, read once and searched many times."""

    def __init__(self, files: Iterable[tuple[str, str]]) -> None:
        """``files``: ``(path, text)`` pairs, paths ``/``-separated relative to the root."""
        self._files = [_File(path, text.lower(), line_count(text)) for path, text in files]

    @classmethod
    def from_repo(cls, repo: str | Path, prefix: str | None = None) -> GrepBaseline:
        """The text files of HEAD in the repository at ``repo``, optionally only those
        whose path starts with ``prefix`` (e.g. semble's ``src/flask/``)."""
        return cls(head_files(repo, prefix))

    def __len__(self) -> int:
        return len(self._files)

    def search(self, query: str, k: int = 10) -> list[Result]:
        """Top ``k`` files by (distinct query words matched, total matches); score is
        ``distinct + total / (total + 1)`` so it orders like the sort key."""
        words = query_words(query)
        scored: list[tuple[int, int, _File]] = []
        for file in self._files:
            counts = [file.lower.count(word) for word in words]
            distinct = sum(1 for c in counts if c)
            if distinct:
                scored.append((distinct, sum(counts), file))
        scored.sort(key=lambda item: (-item[0], -item[1], item[2].path))
        return [_whole_file(f, d + t / (t + 1)) for d, t, f in scored[:k]]

    def ripgrep(self, query: str, k: int = 10) -> list[Result]:
        """Top ``k`` files by number of lines containing the whole query (case-insensitive)."""
        needle = query.lower()
        if not needle:
            return []
        scored: list[tuple[int, _File]] = []
        for file in self._files:
            if needle not in file.lower:
                continue
            count = sum(1 for line in file.lower.split("\n") if needle in line)
            if count:
                scored.append((count, file))
        scored.sort(key=lambda item: (-item[0], item[1].path))
        return [_whole_file(f, float(c)) for c, f in scored[:k]]


def _whole_file(file: _File, score: float) -> Result:
    return Result(file.path, 1, file.lines, score)


def grep_search(files: Iterable[tuple[str, str]], query: str, k: int = 10) -> list[Result]:
    """One-shot :meth:`GrepBaseline.search` over ``(path, text)`` pairs."""
    return GrepBaseline(files).search(query, k)


def ripgrep_search(files: Iterable[tuple[str, str]], query: str, k: int = 10) -> list[Result]:
    """One-shot :meth:`GrepBaseline.ripgrep` over ``(path, text)`` pairs."""
    return GrepBaseline(files).ripgrep(query, k)


def head_files(repo: str | Path, prefix: str | None = None) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every non-binary blob in HEAD's tree, in tree order.

    Symlinks and submodules are skipped; text is decoded as UTF-8 with replacement.
    Raises :class:`NotARepository` / :class:`EmptyRepository`.
    """
    try:
        repository = pygit2.Repository(str(repo))
    except pygit2.GitError as exc:
        raise NotARepository(f"{repo}: not a git repository; pass --repo PATH") from exc
    if repository.head_is_unborn:
        raise EmptyRepository(f"{repo}: no commit yet; commit something first")
    tree = repository.head.peel(pygit2.Commit).tree
    for path, blob in _walk(tree, ""):
        if prefix and not path.startswith(prefix):
            continue
        data = blob.data
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            continue
        yield path, data.decode("utf-8", errors="replace")


def _walk(tree: pygit2.Tree, base: str) -> Iterator[tuple[str, pygit2.Blob]]:
    for entry in tree:
        path = base + decode_path(entry.raw_name or b"")  # same path text as the indexer
        if isinstance(entry, pygit2.Tree):
            yield from _walk(entry, path + "/")
        elif isinstance(entry, pygit2.Blob) and entry.filemode != pygit2.enums.FileMode.LINK:
            yield path, entry
