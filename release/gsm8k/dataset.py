"""GSM8K documents from the jsonl files of OpenAI's grade-school-math repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from release.core.errors import DataNotFoundError, MalformedDataError
from release.core.layout import Layout
from release.core.parse import parse_json

TEST_FILE = "test.jsonl"
TRAIN_FILE = "train.jsonl"


@dataclass(frozen=True)
class GsmDoc:
    question: str
    # The full worked solution, ending in "#### <final answer>" (lm-eval's doc_to_target).
    answer: str


def default_data_dir(root: Path | None = None) -> Path:
    """`../shared/data/gsm8k` beside the checkout's root (`--root`; None: the one the tool works on), as CI
    lays shared/ beside a fresh clone."""
    return (root or Layout.default().root).parent / "shared" / "data" / "gsm8k"


def find_data_dir(explicit: Path | None, root: Path | None = None) -> Path | None:
    """The directory holding both splits, or None when the default copy is absent.

    An explicit --data that lacks the files is the user's mistake and raises; a missing
    default is not (the caller may still use lm-eval, which fetches from the hub).
    """
    candidate = explicit if explicit is not None else default_data_dir(root)
    present = (candidate / TEST_FILE).is_file() and (candidate / TRAIN_FILE).is_file()
    if present:
        return candidate
    if explicit is not None:
        raise DataNotFoundError(f"--data {explicit} does not hold {TEST_FILE} and {TRAIN_FILE}")
    return None


def load_jsonl(path: Path) -> list[GsmDoc]:
    if not path.is_file():
        raise DataNotFoundError(f"{path} does not exist")
    docs: list[GsmDoc] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record = parse_json(line, where=f"{path}:{number}", error=MalformedDataError)
            if not isinstance(record, dict):
                raise MalformedDataError(f"{path}:{number}: expected an object")
            question, answer = record.get("question"), record.get("answer")
            if not isinstance(question, str) or not isinstance(answer, str):
                raise MalformedDataError(f"{path}:{number}: needs string fields question and answer")
            if "#### " not in answer:
                raise MalformedDataError(f"{path}:{number}: answer has no '#### ' final answer")
            docs.append(GsmDoc(question=question, answer=answer))
    if not docs:
        raise MalformedDataError(f"{path} holds no documents")
    return docs


def load_splits(data_dir: Path) -> tuple[list[GsmDoc], list[GsmDoc]]:
    """(test, train): test is scored, train is the few-shot pool, as in lm-eval's gsm8k.yaml."""
    return load_jsonl(data_dir / TEST_FILE), load_jsonl(data_dir / TRAIN_FILE)
