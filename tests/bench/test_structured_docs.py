"""The hand-made structured-document questions of bench/quality.py (tests/data/structured_docs):
the set is well-formed, and every answer is in its document as both extractors read it.

Nothing here touches the database.
"""

import json
from pathlib import Path

import pytest

from knowledge.extraction import detect_format, extract
from tools.judge.data import contains_answer

FOLDER = Path(__file__).resolve().parents[1] / "data" / "structured_docs"
NOT_DOCUMENTS = {"README.md", "questions.jsonl"}
SHAPES = {
    "table row",
    "definition list",
    "lead-in and list",
    "label line",
    "release notes",
    "not answerable",
}


def questions() -> list[dict]:
    with (FOLDER / "questions.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def documents() -> list[Path]:
    return sorted(p for p in FOLDER.iterdir() if p.is_file() and p.name not in NOT_DOCUMENTS)


def test_every_question_says_what_answers_it_or_that_nothing_does():
    rows = questions()
    assert 20 <= len(rows) <= 30
    assert len({row["question"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row) <= {"question", "answers", "document", "shape"}, row
        assert row["shape"] in SHAPES, row
        if row["shape"] == "not answerable":
            assert row["answers"] == [] and "document" not in row, row
        else:
            assert row["answers"] and all(a.strip() for a in row["answers"]), row
            assert (FOLDER / row["document"]).is_file(), row


def test_the_set_holds_every_structured_shape_and_unanswerable_questions():
    shapes = [row["shape"] for row in questions()]
    assert set(shapes) == SHAPES
    assert shapes.count("not answerable") >= 5


def test_every_document_is_used_and_its_source_recorded():
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    used = {row.get("document") for row in questions()}
    for path in documents():
        assert path.name in used, f"{path.name}: no question is answered there"
        assert f"`{path.name}`" in readme, f"{path.name}: source and licence not recorded"


@pytest.mark.parametrize("role", ["primary", "secondary"])
def test_every_answer_is_in_its_document_as_the_extractor_reads_it(role):
    read = {
        path.name: extract(detect_format(path.name, data), data, role=role).text
        for path in documents()
        for data in [path.read_bytes()]
    }
    for row in questions():
        for answer in row["answers"]:
            assert contains_answer(read[row["document"]], [answer]), (row["question"], answer)
