"""Which files get indexed, and why the others are skipped.

A file is skipped, with a reason, when it is a symlink or submodule, in
``.gitragignore`` (gitignore syntax, read from the indexed commit), marked
``linguist-generated`` or ``linguist-vendored`` in ``.gitattributes``, a lock file,
larger than ``max_file_bytes``, a Git LFS pointer, or binary (a NUL byte in its first
8,000 bytes, as git decides). UTF-16/UTF-32 text with a byte-order mark has NUL bytes
too; it is skipped with its own reason ("UTF-16 text (not indexed)"): chunk offsets and
snippets are UTF-8 byte ranges of the blob, and transcoding would break that.
"""

from __future__ import annotations

from dataclasses import dataclass

import pathspec
import pygit2

from gitrag.gitrepo import Entry, GitRepo

LOCK_FILES = frozenset(
    {
        "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb",
        "Cargo.lock", "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock", "composer.lock",
        "Gemfile.lock", "go.sum", "flake.lock", "packages.lock.json", "mix.lock", "Podfile.lock",
    }
)
LFS_MAGIC = b"version https://git-lfs.github.com/spec/"
BINARY_SNIFF = 8000
IGNORE_FILE = ".gitragignore"
# byte-order marks of text that is not UTF-8 (UTF-32 first: its LE mark starts like UTF-16's)
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)


@dataclass(frozen=True)
class Skip:
    path: str
    reason: str


class Policy:
    """Skip rules for one commit of one repository."""

    def __init__(self, repo: GitRepo, commit: str, max_file_bytes: int, entries: list[Entry] | None = None) -> None:
        self.repo = repo
        self.commit = commit
        self.max_file_bytes = max_file_bytes
        self.ignore = self._load_ignore()
        self.has_attributes = self._has_attributes(entries)

    def _load_ignore(self) -> pathspec.PathSpec | None:
        tree = self.repo.repo[self.commit].peel(pygit2.Tree)
        if IGNORE_FILE not in tree:
            return None
        lines = self.repo.read_blob(str(tree[IGNORE_FILE].id)).decode("utf-8", "replace").splitlines()
        return pathspec.PathSpec.from_lines("gitignore", lines)

    def _has_attributes(self, entries: list[Entry] | None) -> bool:
        if entries is None:
            return True
        return any(e.path == ".gitattributes" or e.path.endswith("/.gitattributes") for e in entries)

    def by_path(self, entry: Entry) -> str | None:
        """A skip reason known without reading the blob, else None."""
        if entry.mode == 0o120000:
            return "symlink"
        if entry.mode == 0o160000:
            return "submodule"
        name = entry.path.rsplit("/", 1)[-1]
        if name in LOCK_FILES:
            return "lock file"
        if self.ignore is not None and self.ignore.match_file(entry.path):
            return "in .gitragignore"
        if self.has_attributes:
            for attr, reason in (("linguist-generated", "generated"), ("linguist-vendored", "vendored")):
                if self.repo.attribute(self.commit, entry.path, attr) in (True, "true", "set"):
                    return f"{reason} (.gitattributes)"
        return None

    def by_size(self, size: int) -> str | None:
        """A skip reason from the blob's size in bytes (checked before reading it), else None."""
        return f"larger than {self.max_file_bytes} bytes" if size > self.max_file_bytes else None

    def by_content(self, data: bytes) -> str | None:
        """A skip reason from the blob's bytes, else None."""
        if data.startswith(LFS_MAGIC):
            return "Git LFS pointer"
        if b"\0" in data[:BINARY_SNIFF]:
            wide = next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)
            return f"{wide} text (not indexed)" if wide else "binary"
        return None
