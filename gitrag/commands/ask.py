from __future__ import annotations

from gitrag import output
from gitrag.errors import EXIT_OK
from gitrag.retrieval import AskResponse, ask as run_ask
from gitrag.store import SearchFilter
from gitrag.workspace import open_workspace


def ask(question: str, repo: str, k: int, mode: str, path: str, lang: str, no_answer: bool, as_json: bool) -> int:
    ws = open_workspace(repo)
    try:
        response = run_ask(ws, question, k=k, mode=mode, scope=SearchFilter(path, lang) if (path or lang) else None)
    finally:
        ws.close()
    if as_json:
        output.emit_json(response.to_json())
    else:
        _print(response)
    return EXIT_OK


def _print(r: AskResponse) -> None:
    f = r.freshness
    if not r.results:
        output.out.print("no results")
    for i, res in enumerate(r.results, 1):
        output.out.print(f"[bold]{i:>2}. {res.path}:{res.start_line}-{res.end_line}[/]  {res.symbol}  [dim]{res.score:.4f}[/]")
        lines = res.snippet.splitlines()
        for line in lines[:8]:
            output.out.print("      " + line, markup=False)
        if len(lines) > 8:
            output.out.print(f"      [dim]… {len(lines) - 8} more lines[/]")
    state = "up to date" if f.up_to_date else f"index at {str(f.commit)[:12]}, HEAD at {str(f.head)[:12]}: run `gitrag index`"
    extra = f"; {f.worktree_changes} work-tree file(s) changed, not indexed" if f.worktree_changes else ""
    output.out.print(f"[dim]{f.branch}: {state}{extra}[/]")
