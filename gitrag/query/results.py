"""What an ``ask`` returns: ranked locations, the index's freshness, the response.

Standard library only (and :mod:`gitrag.query.file_results`), so the daemon route of ``gitrag
ask`` rebuilds a response from the daemon's JSON without importing the search stack
(numpy, store, ranking): :mod:`gitrag.query.retrieval` fills these, and re-exports them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gitrag.query.file_results import FileHit

MAX_K = 200  # results (or commits) one ask may ask for: the CLI's -k, the MCP tools' k, the daemon's op


@dataclass
class Result:
    """One ranked location; lines are 1-based and inclusive."""

    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    language: str
    score: float
    snippet: str = ""
    blob: str = ""
    start_byte: int = 0
    end_byte: int = 0
    point_id: str = ""
    expanded_from: str = ""  # set on a graph expansion: the result whose dependency this is
    source: str = "index"  # "index": from the indexed commit; "worktree": from the file on disk (gitrag.query.worktree)
    in_head: bool = False  # a "worktree" result whose file is HEAD's blob: committed, not indexed yet (mid-sync)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Freshness:
    branch: str
    commit: str | None  # the commit the index answered from
    head: str | None  # the branch's HEAD now
    worktree_changes: int

    @property
    def up_to_date(self) -> bool:
        return self.commit is not None and self.commit == self.head


@dataclass
class AskResponse:
    question: str
    freshness: Freshness
    results: list[Result] = field(default_factory=list)
    answer: str | None = None
    mode: str = "hybrid"
    files: list[FileHit] | None = None  # ranked files (``ask --files``), else None
    offset: int = 0  # results skipped before these (paging)
    worktree: dict[str, Any] | None = None  # what the work-tree overlay held (None: not asked for)
    revision: str | None = None  # ``ask --rev``: the revision answered from, as given
    team: dict[str, Any] | None = None  # answered from a team server (gitrag.query.team; docs/team.md), else None

    def to_json(self) -> dict[str, Any]:
        f = self.freshness
        out: dict[str, Any] = {
            "question": self.question, "branch": f.branch, "commit": f.commit, "head": f.head,
            "up_to_date": f.up_to_date, "worktree_changes": f.worktree_changes,
            "results": [r.to_json() for r in self.results], "answer": self.answer, "mode": self.mode,
        }
        if self.files is not None:
            out["files"] = [h.to_json() for h in self.files]
        out["offset"] = self.offset
        out["worktree"] = self.worktree or {"searched": False, "files": 0, "hidden": 0, "embedded": 0, "skipped": 0,
                                            "truncated": 0, "in_head": 0, "late": 0}
        out["revision"] = self.revision
        out["team"] = self.team
        return out
