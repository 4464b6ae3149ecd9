"""Every relative link in README.md and docs/*.md resolves, and the figure rules of
tests/docfigures.py (what a figure is, where it must come from) hold on small pages worked
by hand; tests/test_layers.py applies them to the README."""

from __future__ import annotations

import pytest
from docfigures import DOCS, ROOT, broken_links, figures, slug, unsourced


@pytest.mark.parametrize("path", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


# ----- the rules themselves, on small pages worked by hand --------------------------------

def test_what_counts_as_a_figure():
    line = ("shares 0.667 / 0.500, 45% later, 6.5× flat out, ×1.72 paced, 70 s and 17.4 ms, "
            "§7.1, 10 seeds, 1,000 nodes, 2/3, 44,000 decisions/s, 600/s, `--time-scale 0.05`, "
            "[x](docs/results.md#a-1.5), http://127.0.0.1:8088/")
    assert figures(line) == ["0.667", "0.500", "45", "6.5", "1.72", "70", "17.4", "44,000", "600"]


def test_a_figure_must_link_to_a_section_that_holds_it(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results.md").write_text(
        "# Results\n\n## Speed\n\nRM 0.92 ms per container; 77.3% within.\n\n## Other\n\n45% later.\n")
    ok = "RM: 0.92 ms ([results](docs/results.md#speed)).\n"
    assert unsourced(ok, tmp_path) == []
    # no link; a link without an anchor; the wrong section; a number only part of another
    assert unsourced("RM: 0.92 ms.\n", tmp_path) == [
        "0.92: no link to a docs/results*.md section in 'RM: 0.92 ms.'"]
    assert len(unsourced("RM: 0.92 ms ([r](docs/results.md)).\n", tmp_path)) == 1
    assert unsourced("45% later ([r](docs/results.md#speed)).\n", tmp_path) == [
        "45 is not in docs/results.md#speed (for '45% later ([r](docs/results.md#speed)).')"]
    assert len(unsourced("77% within ([r](docs/results.md#speed)).\n", tmp_path)) == 1
    # a table's figures are sourced by the paragraph before it
    table = "Figures ([r](docs/results.md#speed)):\n\n| what | ms |\n|---|---|\n| RM | 0.92 ms |\n"
    assert unsourced(table, tmp_path) == []
    assert len(unsourced(table.replace("0.92", "0.93"), tmp_path)) == 1


def test_slugs_are_githubs():
    # punctuation dropped, spaces to hyphens, case folded, code marks removed
    assert slug("## Property audit: how the checks count") == "property-audit-how-the-checks-count"
    assert slug("### The chain's CPU per container") == "the-chains-cpu-per-container"
    assert slug("## `rayrm check` and the RM's journal") == "rayrm-check-and-the-rms-journal"
