"""Every lint or type suppression says why on its line: ``# noqa: CODE - reason`` and
``# type: ignore[code]  # reason`` (ruff's RUF100 and mypy's warn_unused_ignores, run by
.ci/run, check that each one still suppresses something)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)$")
NOQA_OK = re.compile(r"^: [A-Z]+[0-9]+(?:, [A-Z]+[0-9]+)* - \S")
IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<rest>.*)$")
IGNORE_OK = re.compile(r"^\[[a-z-]+(?:, [a-z-]+)*\]  # \S")


def unexplained(root: Path, folders: tuple[str, ...] = ("gitrag", "tests", "bench", "scripts")) -> list[str]:
    """``path:line`` of each suppression without a code and a reason."""
    out = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "models" in path.relative_to(root).parts or path.name == "test_suppressions.py":
                continue  # the bundled model's files; this file's own samples
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                for pattern, ok in ((NOQA, NOQA_OK), (IGNORE, IGNORE_OK)):
                    m = pattern.search(line)
                    if m and not ok.match(m.group("rest")):
                        out.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return out


def test_every_suppression_says_why() -> None:
    assert unexplained(ROOT) == []


def test_the_check_finds_a_bare_suppression(tmp_path: Path) -> None:
    (tmp_path / "gitrag").mkdir()
    (tmp_path / "gitrag" / "a.py").write_text(
        "x = 1  # noqa: E731 - a reason\n"
        "y = 2  # noqa: E731\n"
        "z = 3  # noqa\n"
        "w = f()  # type: ignore[arg-type]  # a reason\n"
        "v = f()  # type: ignore[arg-type]\n")
    assert [f.split(": ", 1)[0] for f in unexplained(tmp_path)] == ["gitrag/a.py:2", "gitrag/a.py:3", "gitrag/a.py:5"]
