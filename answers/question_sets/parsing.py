"""Question rows from a CSV or JSONL upload, or from the browser's form: all valid, or a
typed error that names every bad line (nothing is saved from a bad file).

CSV: a header row naming `question` and optionally `answer` (no other column), then one
question per row. JSONL: one JSON object per line with `question` and optionally `answer`
(a string or null). An empty or absent answer means "not answerable".

Only the chat shows these messages (there is no API for question sets), so they are worded
in the reader's language where they are raised (`locale/*/LC_MESSAGES/django.po`)."""

import csv
import io
import json
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from answers.pipeline.request import MAX_QUERY_CHARS
from core.errors import UnprocessableError
from core.inputs import text_is_storable

MAX_FILE_BYTES = 1024 * 1024
MAX_QUESTIONS = 500
MAX_ANSWER_CHARS = 2000
COLUMNS = ("question", "answer")
FORMATS = ("csv", "jsonl")
MAX_LINE_ERRORS = 20  # reported; the count says how many more


@dataclass(frozen=True)
class QuestionRow:
    line: int
    question: str
    expected: str  # "" : not answerable


class QuestionFileInvalid(UnprocessableError):
    """A question file or form that is refused whole; `lines` lists each bad line (its
    number in the file, a code and a message), at most MAX_LINE_ERRORS of them."""

    def __init__(
        self, message: str, *, code: str, lines: list[tuple[int, str, str]] | None = None
    ) -> None:
        lines = lines or []
        fields = {f"line {n}": f"{text} ({error})" for n, error, text in lines[:MAX_LINE_ERRORS]}
        if len(lines) > MAX_LINE_ERRORS:
            more = len(lines) - MAX_LINE_ERRORS
            fields["more"] = ngettext(
                "%(count)s more line has errors.", "%(count)s more lines have errors.", more
            ) % {"count": more}
        super().__init__(message, code=code, fields=fields)
        self.lines = lines


def question_format_of(filename: str) -> str:
    """`csv` or `jsonl` from the file's name; QuestionFileInvalid `unsupported_type` else."""
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if suffix in {"jsonl", "ndjson"}:
        return "jsonl"
    if suffix == "csv":
        return "csv"
    raise QuestionFileInvalid(
        _("A question file is a .csv or .jsonl file."), code="unsupported_type"
    )


def questions_parse(data: bytes, *, file_format: str) -> list[QuestionRow]:
    """Every row of the file, checked; QuestionFileInvalid when the file or any row is bad:
    `too_large`, `empty_file`, `not_utf8`, `not_text` (NUL bytes: not a text file),
    `wrong_columns`, `too_many_questions`, or `invalid_rows` listing each bad line."""
    if len(data) > MAX_FILE_BYTES:
        raise QuestionFileInvalid(
            _("A question file holds at most %(kib)s KiB.") % {"kib": MAX_FILE_BYTES // 1024},
            code="too_large",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise QuestionFileInvalid(_("The file is not UTF-8 text."), code="not_utf8") from None
    if "\x00" in text:
        raise QuestionFileInvalid(_("The file is not a text file."), code="not_text")
    if not text.strip():
        raise QuestionFileInvalid(_("The file holds no questions."), code="empty_file")
    if file_format == "csv":
        rows, errors = _csv_rows(text)
    elif file_format == "jsonl":
        rows, errors = _jsonl_rows(text)
    else:
        raise QuestionFileInvalid(_("A question file is CSV or JSONL."), code="unsupported_type")
    return questions_check(rows, errors)


def questions_check(
    rows: list[tuple[int, object, object]], errors: list[tuple[int, str, str]] | None = None
) -> list[QuestionRow]:
    """(line, question, answer) rows as read → checked rows, or QuestionFileInvalid."""
    errors = list(errors or [])
    if not rows and not errors:
        raise QuestionFileInvalid(_("The file holds no questions."), code="empty_file")
    if len(rows) > MAX_QUESTIONS:
        raise QuestionFileInvalid(
            _("A question set holds at most %(count)s questions.") % {"count": MAX_QUESTIONS},
            code="too_many_questions",
        )
    checked: list[QuestionRow] = []
    seen: dict[str, int] = {}
    for line, question, answer in rows:
        if answer is None:
            answer = ""
        if not isinstance(question, str) or not isinstance(answer, str):
            errors.append((line, "not_text", _("The question and the answer are text.")))
            continue
        question, answer = question.strip(), answer.strip()
        if not question:
            errors.append((line, "question_missing", _("The row has no question.")))
        elif len(question) > MAX_QUERY_CHARS or len(answer) > MAX_ANSWER_CHARS:
            errors.append(
                (
                    line,
                    "too_long",
                    _("A question holds at most %(question)s characters, an answer %(answer)s.")
                    % {"question": MAX_QUERY_CHARS, "answer": MAX_ANSWER_CHARS},
                )
            )
        elif not text_is_storable(question) or not text_is_storable(answer):
            errors.append((line, "not_text", _("The row holds characters that are not text.")))
        elif (key := " ".join(question.casefold().split())) in seen:
            same = _("The same question as line %(line)s.") % {"line": seen[key]}
            errors.append((line, "duplicate_question", same))
        else:
            seen[key] = line
            checked.append(QuestionRow(line, question, answer))
    if errors:
        errors.sort()
        raise QuestionFileInvalid(
            ngettext(
                "%(count)s line of the file is not a valid question; nothing was saved.",
                "%(count)s lines of the file are not valid questions; nothing was saved.",
                len(errors),
            )
            % {"count": len(errors)},
            code="invalid_rows",
            lines=errors,
        )
    return checked


def _csv_rows(text: str) -> tuple[list[tuple[int, object, object]], list[tuple[int, str, str]]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
        names = [name.strip().lower() for name in header]
        if "question" not in names or set(names) - set(COLUMNS) or len(set(names)) != len(names):
            raise QuestionFileInvalid(
                _(
                    "The first row names the columns: question, and optionally answer "
                    "(found: %(found)s)."
                )
                % {"found": ", ".join(header)[:200]},
                code="wrong_columns",
            )
        rows: list[tuple[int, object, object]] = []
        errors: list[tuple[int, str, str]] = []
        for record in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in record):
                continue  # a blank line
            if len(record) != len(names):
                errors.append(
                    (
                        line,
                        "wrong_field_count",
                        _("%(found)s fields where the header has %(expected)s.")
                        % {"found": len(record), "expected": len(names)},
                    )
                )
                continue
            values = dict(zip(names, record, strict=True))
            rows.append((line, values["question"], values.get("answer", "")))
            if len(rows) > MAX_QUESTIONS:
                break
    except csv.Error:
        raise QuestionFileInvalid(
            _("The file is not CSV (line %(line)s).") % {"line": reader.line_num}, code="not_csv"
        ) from None
    return rows, errors


def _jsonl_rows(text: str) -> tuple[list[tuple[int, object, object]], list[tuple[int, str, str]]]:
    rows: list[tuple[int, object, object]] = []
    errors: list[tuple[int, str, str]] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            errors.append((line, "not_json", _("The line is not a JSON object.")))
            continue
        if not isinstance(value, dict):
            errors.append((line, "not_json", _("The line is not a JSON object.")))
            continue
        unknown = sorted(set(value) - set(COLUMNS))
        if unknown:
            keys = _("Unknown keys: %(keys)s.") % {"keys": ", ".join(unknown)[:200]}
            errors.append((line, "wrong_keys", keys))
            continue
        rows.append((line, value.get("question", ""), value.get("answer")))
        if len(rows) > MAX_QUESTIONS:
            break
    return rows, errors
