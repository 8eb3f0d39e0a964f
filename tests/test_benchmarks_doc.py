"""BENCHMARKS.md is generated from bench/results/*.json (bench/render_benchmarks.py): a hand
edit or a results file changed without a re-render fails here, and so does a malformed
results file (one line naming the file and what is wrong)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import record

ROOT = Path(__file__).resolve().parent.parent
RENDER = [sys.executable, str(ROOT / "bench" / "render_benchmarks.py")]


def render(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RENDER, *args], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)


def good(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "title": "Widget speed", "issue": 20,
        "commands": ["python bench/bench_widget.py --rounds 3"],
        "measured": {"date": "2026-12-02", "commit": "abc1234", "machine": "2 cores, shared, load 8-15"},
        "text": "How fast widgets are.",
        "tables": [{"caption": "per widget", "columns": ["widget", "n", "Acc@1"],
                    "rows": [["round", 3, 0.85], ["square", 4, None]], "digits": [None, None, 3]}],
        "notes": ["Goal (Acc@1 >= 0.8): met."],
    }
    data.update(changes)
    return data


def test_benchmarks_md_is_what_the_results_render_to() -> None:
    got = render("--check")
    assert got.returncode == 0, got.stderr


def test_every_results_file_follows_the_format() -> None:
    files = record.load_all()
    assert len(files) >= 20
    for path, data in files:
        assert record.subject_of(data) in dict(record.SUBJECTS), path


def test_check_fails_on_a_hand_edit_and_names_the_difference(tmp_path: Path) -> None:
    edited = tmp_path / "BENCHMARKS.md"
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert "| hybrid | 0.856 | 0.926 |" in text
    edited.write_text(text.replace("| hybrid | 0.856 | 0.926 |", "| hybrid | 0.866 | 0.926 |", 1), encoding="utf-8")
    got = render("--check", "--out", str(edited))
    assert got.returncode == 1
    assert "is not what bench/results/ renders to" in got.stderr
    assert "-| hybrid | 0.866 | 0.926 |" in got.stderr and "+| hybrid | 0.856 | 0.926 |" in got.stderr


def test_a_new_results_file_is_picked_up_in_its_issues_section(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(ROOT / "bench" / "results", results)
    (results / "widget.json").write_text(json.dumps(good()), encoding="utf-8")
    (results / "zz-unknown.json").write_text(json.dumps(good(title="Gadgets", issue=999)), encoding="utf-8")
    (results / "scale-disk.json").write_text(json.dumps(good(title="Disk per chunk", issue=21)), encoding="utf-8")
    out = tmp_path / "B.md"
    assert render("--write", "--results", str(results), "--out", str(out)).returncode == 0
    text = out.read_text(encoding="utf-8")
    localization, indexing = text.index("## Localization on real issues"), text.index("## Indexing and scale")
    assert localization < text.index("### Widget speed") < indexing  # issue 20's section
    assert text.index("## Other figures") < text.index("### Gadgets")  # an issue with no section: the last one
    assert text.index("## Storage") < text.index("### Disk per chunk") < text.index("## Queries")  # by its name
    assert "| round | 3 | 0.850 |" in text and "| square | 4 | – |" in text
    assert "python bench/bench_widget.py --rounds 3" in text and "commit `abc1234`" in text
    assert render("--check", "--out", str(ROOT / "BENCHMARKS.md"), "--results", str(results)).returncode == 1


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "not JSON"),
    (json.dumps([1, 2]), "does not hold a JSON object"),
    (json.dumps({k: v for k, v in good().items() if k != "commands"}), "no 'commands' field"),
    (json.dumps(good(measured={"date": "2026-12-02"})), "'measured.machine' is missing"),
    (json.dumps(good(tables=[{"caption": "", "columns": ["a", "b"], "rows": [["x"]]}])),
     "tables[0].rows[0] has 1 cells for 2 columns"),
    (json.dumps(good(issue="twenty")), "'issue' is not an issue number"),
    (json.dumps(good(subject="misc")), "'subject' 'misc' is not one of"),
    (json.dumps(good(figures=[1])), "unknown field 'figures'"),
])
def test_a_malformed_results_file_is_rejected_in_one_line(tmp_path: Path, content: str, problem: str) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "fine.json").write_text(json.dumps(good()), encoding="utf-8")
    bad = results / "bad.json"
    bad.write_text(content, encoding="utf-8")
    with pytest.raises(record.ResultsError, match="bad.json: ") as raised:
        record.load(bad)
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    out = tmp_path / "B.md"
    got = render("--write", "--results", str(results), "--out", str(out))
    assert got.returncode == 2 and not out.exists()
    assert got.stderr.count("\n") == 1 and "bad.json" in got.stderr and problem in got.stderr


def test_record_write_fills_in_the_run_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "widget.json"
    written = record.write(path, title="Widget speed", issue=20,
                           tables=[record.table("", ["widget", "ms"], [["round", 1.5]], digits=[None, 1])],
                           notes=["a note"])
    assert record.load(path) == written
    assert written["commands"] and " cores" in written["measured"]["machine"]
    assert len(written["measured"]["date"]) == 10
    with pytest.raises(record.ResultsError, match="rows"):
        record.write(tmp_path / "bad.json", title="x", issue=20, tables=[{"caption": "", "columns": ["a"], "rows": []}])
    assert not (tmp_path / "bad.json").exists()


def test_a_bench_script_records_its_figures_in_the_format(tmp_path: Path) -> None:
    """bench_localize.py --summarize (no index needed) --record: a results file the renderer takes."""
    def ranks(rank: int) -> dict[str, float]:
        return {"first_rank": rank, "acc@1": float(rank <= 1), "acc@3": float(rank <= 3), "acc@5": float(rank <= 5),
                "acc@10": 1.0, "func_recall@5": 0.5}
    rows = [{"language": lang, "repo": f"o/r{i}", "instance": f"x-{i}", "gitrag": ranks(rank), "bm25": ranks(9)}
            for i, (lang, rank) in enumerate([("python", 1), ("python", 4), ("rust", 2)])]
    issues = tmp_path / "r.jsonl"
    issues.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    results = tmp_path / "results"
    got = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_localize.py"), "--summarize", str(issues),
                          "--record", str(results / "localize.json")],
                         cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert got.returncode == 0, got.stderr
    data = record.load(results / "localize.json")
    assert data["issue"] == 20 and "--summarize" in data["commands"][0]
    rows_by_name = {r[0]: r for r in data["tables"][0]["rows"]}
    assert rows_by_name["overall gitrag"][1:3] == [3, 100.0 / 3] and rows_by_name["python gitrag"][2] == 50.0
    out = tmp_path / "B.md"
    assert render("--write", "--results", str(results), "--out", str(out)).returncode == 0
    assert "| overall gitrag | 3 | 33.3 |" in out.read_text(encoding="utf-8")


def test_a_printed_report_becomes_a_table_part_by_part(capsys: pytest.CaptureFixture[str]) -> None:
    """What bench_overlay.py --record keeps of its text report."""
    with record.capture() as out:
        print("indexed click: 1949 chunks in 21.0 s")
        print("\n20 dirty files of 500 lines")
        print("  first ask:  overlay  108.0 ms  committed 35.0 ms")
        print("  cached:     overlay    2.3 ms")
        print("\n--rev HEAD~50: 77 files differ")
        print("  asked again: 0.09 s")
    assert "cached:     overlay    2.3 ms" in capsys.readouterr().out  # still printed
    got = record.printed("p50s", out.getvalue())
    assert got["columns"] == ["part", "figure"]
    assert got["rows"] == [
        ["indexed click: 1949 chunks in 21.0 s", ""],
        ["20 dirty files of 500 lines", "first ask:  overlay  108.0 ms  committed 35.0 ms"],
        ["20 dirty files of 500 lines", "cached:     overlay    2.3 ms"],
        ["--rev HEAD~50: 77 files differ", "asked again: 0.09 s"],
    ]
    assert record.problems(good(tables=[got])) == []


def test_prose_is_filled_without_starting_a_line_markdown_would_misread() -> None:
    from bench import render_benchmarks

    for shift in range(12):
        text = "w" * (shift + 1) + " " + " ".join(f"0.{i:03d} > 0.787 - 1. + # | x" for i in range(40))
        filled = render_benchmarks._wrap(text, "- ", "  ")
        lines = filled.splitlines()
        assert lines[0].startswith("- ") and all(line.startswith("  ") for line in lines[1:])
        assert all(len(line) <= render_benchmarks.WIDTH for line in lines)
        for line in lines[1:]:
            assert line.split()[0] not in {">", "-", "1.", "+", "#", "|"}, line
        assert filled.replace("\n  ", " ")[2:] == text
