"""A headline figure reads the same wherever the docs restate it.

The forecasting results' headline table is the source of the SSM's error as a multiple of the best
baseline on each development set; the goals table below it and the choosing page restate those
multiples. A re-run that updates one place and not the others (1.341 against 1.342) fails here.
Plain markdown parsing: no site build, fast.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FORECASTING = DOCS / "results" / "forecasting.md"
CHOOSING = DOCS / "guides" / "choosing.md"
SETS = ("airline", "lynx", "shampoo", "uschange", "fertility", "macrodata", "M1")
NUMBER = re.compile(r"\d+\.\d+")


def markdown_table(text: str, header: str) -> list[dict[str, str]]:
    """The rows of the first table whose header line starts with `header`, as {column: cell}."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"no table with the header {header!r}"
    columns = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(dict(zip(columns, cells)))
    return rows


def ratios_by_set(rows: list[dict[str, str]], column: str) -> dict[str, str]:
    """{set: the first number of `column`} for the rows whose first cell names one of SETS."""
    found = {}
    for row in rows:
        first = next(iter(row.values()))
        name = next((s for s in SETS if re.match(rf"\W*{s}\b", first)), None)
        number = NUMBER.search(row[column].replace("*", ""))
        if name and number:
            found[name] = number.group()
    return found


def headline_ratios() -> dict[str, str]:
    rows = markdown_table(FORECASTING.read_text(encoding="utf-8"), "| set | SSM | seasonal naive |")
    return ratios_by_set(rows, "SSM / best baseline")


def stated_multiples(text: str) -> list[tuple[str, str]]:
    """(set, multiple) for every "<set> ... N.NNNx" within one table cell or sentence."""
    within = r"(?:(?!\. )[^|;])*?"  # no cell border, no end of a sentence (". "); decimals pass
    pattern = re.compile(rf"\b({'|'.join(SETS)})\b{within}(?<![\d.])(\d+\.\d{{3}})x")
    return [(m.group(1), m.group(2)) for m in pattern.finditer(text)]


def test_the_headline_table_names_every_set():
    assert set(headline_ratios()) == set(SETS)


def test_the_goals_table_restates_the_headline_ratios():
    headline = headline_ratios()
    goals = ratios_by_set(
        markdown_table(FORECASTING.read_text(encoding="utf-8"), "| set | SSM defaults / best baseline |"),
        "SSM defaults / best baseline",
    )
    assert len(goals) >= 6
    differ = {name: (value, headline[name]) for name, value in goals.items() if value != headline[name]}
    assert not differ, f"the goals table's ratios differ from the headline's (goals, headline): {differ}"


def test_the_choosing_page_states_the_headline_ratios():
    headline = headline_ratios()
    stated = stated_multiples(CHOOSING.read_text(encoding="utf-8"))
    assert {name for name, _ in stated} >= {"airline", "lynx", "shampoo", "uschange", "fertility", "M1"}
    differ = [(name, value, headline[name]) for name, value in stated if value != headline[name]]
    assert not differ, f"the choosing page's multiples differ from the headline's (set, stated, headline): {differ}"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "the network lost: shampoo (36 months) 1.341x and uschange 1.846x",
            [("shampoo", "1.341"), ("uschange", "1.846")],
        ),
        ("M1's 181 yearly series: MASE **3.417** against AutoETS 3.554 (0.961x)", [("M1", "0.961")]),
        ("macrodata | 12.500x", []),  # another cell
        ("lynx wins. It is 2.000x", []),  # another sentence
    ],
)
def test_the_multiples_are_read_within_a_cell(text, expected):
    assert stated_multiples(text) == expected
