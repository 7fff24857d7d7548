"""The docs a newcomer reads: a short README, pages broken into sections, and a repository that
cites no document outside itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 250
SECTION_MAX_LINES = 150


def test_readme_is_short_and_keeps_the_full_benchmark_table_elsewhere():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    assert lines[0] == "# hudi-flight"
    assert "make demo" in "\n".join(lines[:10]) and "make test" in "\n".join(lines[:10])
    assert "bench/results/results.md" in "\n".join(lines)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_runs_long_without_a_heading(page):
    in_code, last, longest = False, 0, 0
    lines = page.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            longest, last = max(longest, number - last), number
    longest = max(longest, len(lines) - last)
    assert longest <= SECTION_MAX_LINES, f"{page.name}: {longest} lines without a heading"


def test_nothing_cites_the_contract_document_outside_the_repository():
    tracked = subprocess.run(
        ["git", "grep", "-l", "-I", "interfaces.md"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert [path for path in tracked if path != "tests/test_docs_shape.py"] == []
