"""Facts in the docs that data decides are held to that data; measured figures name what prints them.

- The table of release lines in docs/patch-queue.md is `patches/lines.toml` (names, series) with the
  first and last tag of `patches/train.toml` on each line.
- A count of the train's tags written in the prose ("the 19 train tags", "all six tags") is the
  number of tags in `patches/train.toml`: a train add or remove fails here until the docs follow
  (or are phrased so that they need not: "every tag of the train", "`train list` shows them").
- Which vLLM releases need no overlay is the scan's sentence (`no_overlay_needed`, over every bug), said
  in those words in README.md, docs/overlay.md and docs/affected-releases.md: a second bug that outlives the
  first fix fails here until the docs stop saying the first one's range.
- A section that gives a measured time or size names the benchmark or command that prints it
  (`benchmarks/NAME.py` that exists, `pytest --durations`, or a `nox -s`/`python -m release`
  command), so that a stale figure can be measured again.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from helpers import REPO
from helpers.doc_commands import docs, fenced_blocks

UNITS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
WORDS = [*UNITS, *TEENS, "twenty", *(f"twenty-{unit}" for unit in UNITS)]  # what number() reads
NUMBER = r"\d+|" + "|".join(sorted(WORDS, key=len, reverse=True))
TRAIN_COUNT_RE = re.compile(rf"\b(?:(?:all|the) )?(?P<n>{NUMBER}) (?:train tags|tags of the train)\b|"
                            rf"\ball (?P<m>{NUMBER}) (?:tags|wheels)\b", re.IGNORECASE)  # fmt: skip
FIGURE_RE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:[–-]\d[\d,]*(?:\.\d+)?)?\s?(?:s|ms|µs|min|MB|MiB|KiB|kB|GB|GiB)\b"
)
SOURCE_RE = re.compile(r"benchmarks/(\w+)\.py|--durations|`(?:python3? -m )?nox -s [^`]+`|`python3? -m release [^`]+`")


def toml(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def number(text: str) -> int:
    return int(text) if text.isdigit() else WORDS.index(text.lower()) + 1


def prose(text: str) -> str:
    """The text with fenced blocks blanked (line numbers kept): commands and output are not claims."""
    lines = text.splitlines()
    for _, fence, body in fenced_blocks(text):
        for at in [fence, *(n for n, _ in body), (body[-1][0] + 1) if body else fence + 1]:
            if at - 1 < len(lines):
                lines[at - 1] = ""
    return "\n".join(lines)


def train_tags() -> list[dict[str, str]]:
    releases = toml(REPO / "patches" / "train.toml").get("release", [])
    assert isinstance(releases, list)
    return releases


def test_the_release_line_table_is_the_data() -> None:
    text = (REPO / "docs" / "patch-queue.md").read_text(encoding="utf-8")
    table = re.search(r"^\| line \| train tags \|.*\n\|[- |]+\n((?:\|.*\n)+)", text, re.MULTILINE)
    assert table, "docs/patch-queue.md lost its table of release lines (| line | train tags | ...)"
    rows = [[cell.strip() for cell in row.strip("|\n").split("|")] for row in table.group(1).splitlines()]
    documented = {re.sub(r"`(\w+)`.*", r"\1", row[0]): (row[1], row[3].strip("`")) for row in rows}
    lines = toml(REPO / "patches" / "lines.toml")["line"]
    assert isinstance(lines, list)
    expected = {}
    for line in lines:
        on_line = [entry["tag"].removeprefix("v") for entry in train_tags() if entry.get("line") == line["name"]]
        span = f"{on_line[0]} - {on_line[-1]}" if len(on_line) > 1 else (on_line[0] if on_line else "none")
        expected[line["name"]] = (span, line["series"])
    assert documented == expected


@pytest.mark.parametrize("doc", docs(REPO), ids=lambda doc: doc.name)
def test_counts_of_the_train_in_the_prose_are_the_train(doc: Path) -> None:
    count = len(train_tags())
    wrong = []
    for at, line in enumerate(prose(doc.read_text(encoding="utf-8")).splitlines(), 1):
        for match in TRAIN_COUNT_RE.finditer(line):
            said = number(match.group("n") or match.group("m"))
            if said != count:
                wrong.append(f"{doc.relative_to(REPO)}:{at}: {match.group(0)!r}, the train has {count} tags")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("doc", docs(REPO), ids=lambda doc: doc.name)
def test_every_section_with_measured_figures_names_what_prints_them(doc: Path) -> None:
    problems = []
    for section in re.split(r"^#+ ", prose(doc.read_text(encoding="utf-8")), flags=re.MULTILINE):
        measured = [
            para
            for para in re.split(r"\n\s*\n", section)
            if re.search(r"\bmeasured\b", para, re.IGNORECASE) and FIGURE_RE.search(para)
        ]
        if not measured:
            continue
        sources = list(SOURCE_RE.finditer(section))
        named = [m.group(1) for m in sources if m.group(1)]
        missing = [name for name in named if not (REPO / "benchmarks" / f"{name}.py").is_file()]
        if not sources or missing:
            title = section.splitlines()[0][:60]
            figure = FIGURE_RE.search(measured[0])
            why = f"cite missing benchmarks {missing}" if missing else "name no benchmark or command"
            problems.append(
                f"{doc.relative_to(REPO)}, section {title!r}: measured figures ({figure and figure[0]!r}, ...) {why}"
            )
    assert not problems, "\n".join(problems)


def test_every_row_of_the_measurements_names_its_date_and_the_command_that_measures_it_again() -> None:
    """docs/measurements.md is where dated figures live: a row without its command cannot be refreshed."""
    text = prose((REPO / "docs" / "measurements.md").read_text(encoding="utf-8"))
    problems = []
    for table in re.finditer(r"^(\|.*\|)\n\|[- |]+\|\n((?:\|.*\|\n?)+)", text, re.MULTILINE):
        header = [cell.strip() for cell in table.group(1).strip("|").split("|")]
        if header[-1] != "command":
            continue
        for row in table.group(2).splitlines():
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip("|"))]
            if not SOURCE_RE.search(cells[-1]) and not re.search(r"`[^`]+`", cells[-1]):
                problems.append(f"no command: {row[:80]}")
            if "when" in header and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[header.index("when")]):
                problems.append(f"no date: {row[:80]}")
    assert not problems, "\n".join(problems)
    assert "| command |" in text


@pytest.mark.parametrize("doc", ["README.md", "docs/overlay.md", "docs/affected-releases.md"])
def test_which_releases_need_no_overlay_is_the_scans_sentence(doc: str) -> None:
    import json

    from release.core.layout import Layout
    from release.scan.document import no_overlay_needed

    document = json.loads(Layout(REPO).affected_json.read_text(encoding="utf-8"))
    text = " ".join((REPO / doc).read_text(encoding="utf-8").split())
    assert no_overlay_needed(document) in text
    # No other release is called the first without the bugs: no "X from 0.22.0 on needs nothing" by hand.
    assert not re.search(r"from \d+\.\d+\.\d+ on needs nothing|\(\d+\.\d+\.\d+ or later\)", text)


def test_the_sentence_follows_the_data_when_a_second_bug_outlives_the_first_fix() -> None:
    import json

    from release.core.layout import Layout
    from release.scan.document import fixed_in, no_overlay_needed

    document = json.loads(Layout(REPO).affected_json.read_text(encoding="utf-8"))
    first = document["fixed_in"]
    assert first and first in no_overlay_needed(document)
    releases = document["releases"]
    for entry in releases.values():  # a second bug on every release the first one's line reaches, fixed nowhere
        if entry["status"] != "not-affected":
            entry["bugs"]["second"] = "affected"
            entry["status"] = "affected"
    document["fixed_in"] = fixed_in(document["scanned"], releases)
    assert document["fixed_in"] is None
    assert first not in no_overlay_needed(document) and "No vLLM release" in no_overlay_needed(document)
