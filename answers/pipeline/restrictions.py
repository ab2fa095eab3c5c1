"""Values that answer what was asked (issue 26): the restrictions a part of the question
names for a dataset, the governed SQL that carries them, and the check that a planned
query carries every one of them before its value may answer that part.

A restriction is named by the question, never by the model: a value of a text column of
the snapshot (its per-snapshot dictionary of distinct values), a quoted value or the word
after a text column's name ("customer omega"), a year or a date for a date column, a
comparison ("over 1,000") for a numeric column. The planner adds them to the SQL it
builds; `restrictions_unmet` rereads any planned SQL (the rule planner's or another
provider's) and lists what it lacks — a value computed without them answers a different
question, so it is not released for that part.
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from answers.pipeline.vocabulary import Column, DatasetInfo, RestrictionRecord
from knowledge.normalise import normalised_key, normalised_words

NUMERIC_TYPES = (
    "INT",
    "BIGINT",
    "DOUBLE",
    "DECIMAL",
    "FLOAT",
    "REAL",
    "HUGEINT",
    "SMALLINT",
    "TINYINT",
    "UBIGINT",
    "UINTEGER",
    "USMALLINT",
    "UTINYINT",
    "INTEGER",
)
DATE_TYPES = ("DATE", "TIMESTAMP")
QUOTED_VALUE = re.compile(r"[\"“']([^\"”']{1,80})[\"”']")
ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
YEAR = re.compile(r"\b(19\d{2}|20\d{2})\b")
NUMBER = r"\$?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
COMPARISONS = (
    (">=", r"at least|no less than|not less than"),
    ("<=", r"at most|no more than|not more than|up to"),
    (">", r"over|above|more than|greater than|exceeding|higher than|larger than|bigger than"),
    ("<", r"under|below|less than|fewer than|lower than|smaller than"),
)
COMPARISON = re.compile(
    r"\b(" + "|".join(words for _, words in COMPARISONS) + r")\s+" + NUMBER, re.I
)
# Words after a column's name that are not a value of it ("customer count", "per customer").
NOT_VALUES = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "with",
        "in",
        "of",
        "for",
        "and",
        "or",
        "by",
        "per",
        "to",
        "on",
        "at",
        "from",
        "that",
        "this",
        "who",
        "which",
        "what",
        "names",
        "name",
        "count",
        "counts",
        "total",
        "totals",
        "amount",
        "amounts",
        "number",
        "numbers",
        "ids",
        "id",
        "list",
        "records",
        "rows",
        "data",
        "table",
    ]
)
OPERATORS: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
}
MIRRORED = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


@dataclass(frozen=True)
class Restriction:
    """`column` `op` `value` as the question names it; `column` None: no column of the
    snapshot can hold it (a year over a table without dates), so no query carries it."""

    column: str | None
    op: str  # "=", ">", ">=", "<", "<=", "year", "day"
    value: str | float

    def as_dict(self) -> RestrictionRecord:
        return {"column": self.column, "op": self.op, "value": self.value}

    def describe(self) -> str:
        column = self.column or "?"
        if self.op in ("year", "day"):
            return f"{column} in {self.value}"
        value = f"'{self.value}'" if isinstance(self.value, str) else _number_text(self.value)
        return f"{column} {self.op} {value}"


def _is_text(column: Column) -> bool:
    return column["type"].upper().startswith(("VARCHAR", "TEXT", "STRING"))


def _is_numeric(column: Column) -> bool:
    return column["type"].upper().startswith(NUMERIC_TYPES)


def _is_date(column: Column) -> bool:
    return column["type"].upper().startswith(DATE_TYPES)


def _named(name: str, words: list[str]) -> bool:
    name = name.casefold()
    return name in words or f"{name}s" in words


def _number(text: str, decimals: str | None) -> float:
    return float(text.replace(",", "") + (f".{decimals}" if decimals else ""))


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def restrictions_named(text: str, dataset: DatasetInfo) -> list[Restriction]:
    """The restrictions `text` names for `dataset`, in the order found, without repeats."""
    words = normalised_words(text)
    column_words = {w for c in dataset.columns for w in normalised_words(c["name"])}
    found: list[Restriction] = []

    def add(restrictions: Iterable[Restriction]) -> None:
        for restriction in restrictions:
            if restriction not in found:
                found.append(restriction)

    add(_quoted_values(text, dataset, words))
    add(_dictionary_values(text, dataset, column_words))
    # A text column already restricted keeps that value; the word after its name is not one.
    named_columns = {r.column for r in found}
    add(_values_after_column_names(text, dataset, column_words, skip=named_columns))
    date_column = _date_column(dataset, words)
    spans = [*_comparisons(text, dataset), *_days(text, date_column)]
    add(restriction for _, restriction in spans)
    add(_years(text, dataset, date_column, taken=[span for span, _ in spans]))
    return found


def _quoted_values(text: str, dataset: DatasetInfo, words: list[str]) -> list[Restriction]:
    """A quoted value, for the text column named in `text` (else the only one there is)."""
    quoted = QUOTED_VALUE.search(text)
    if not quoted:
        return []
    text_columns = [c for c in dataset.columns if _is_text(c)]
    named = [c for c in text_columns if _named(c["name"], words)]
    column = named[0] if named else (text_columns[0] if len(text_columns) == 1 else None)
    return [Restriction(column["name"] if column else None, "=", quoted.group(1))]


def _dictionary_values(
    text: str, dataset: DatasetInfo, column_words: set[str]
) -> Iterator[Restriction]:
    """Every value of a text column's dictionary that `text` names, unless its words are only
    function words or column names."""
    key = normalised_key(text)
    for column in (c for c in dataset.columns if _is_text(c)):
        for value in dataset.dictionary.get(column["name"], []):
            value_key = normalised_key(value)
            value_words = normalised_words(value)
            if not value_key or set(value_words) <= NOT_VALUES | column_words:
                continue
            if value_key in key:
                yield Restriction(column["name"], "=", value)


def _values_after_column_names(
    text: str, dataset: DatasetInfo, column_words: set[str], *, skip: set[str | None]
) -> Iterator[Restriction]:
    """For each text column not in `skip`, the first word after its name ("customer omega",
    "customers named omega") that is neither a function word nor a column name."""
    for column in (c for c in dataset.columns if _is_text(c)):
        if column["name"] in skip:
            continue
        name = re.escape(column["name"])
        pattern = re.compile(rf"\b{name}s?\s+(?:named\s+|called\s+)?([^\s?.!,;:]+)", re.I)
        for match in pattern.finditer(text):
            token = match.group(1).strip("\"“”'’")
            folded = token.casefold()
            if not token or folded in NOT_VALUES or folded in column_words:
                continue
            yield Restriction(column["name"], "=", token)
            break


def _comparisons(text: str, dataset: DatasetInfo) -> Iterator[tuple[tuple[int, int], Restriction]]:
    """Each comparison ("over 1,000") with its span in `text`."""
    for match in COMPARISON.finditer(text):
        op = next(op for op, phrases in COMPARISONS if re.fullmatch(phrases, match.group(1), re.I))
        column = _compared_column(text[: match.start()], dataset)
        yield match.span(), Restriction(column, op, _number(match.group(2), match.group(3)))


def _date_column(dataset: DatasetInfo, words: list[str]) -> str | None:
    """The date column named in the question, else the first one (None: there is none)."""
    dates = [c for c in dataset.columns if _is_date(c)]
    named = next((c["name"] for c in dates if _named(c["name"], words)), None)
    return named or (dates[0]["name"] if dates else None)


def _days(text: str, date_column: str | None) -> Iterator[tuple[tuple[int, int], Restriction]]:
    """Each ISO date in `text`, with its span."""
    for match in ISO_DATE.finditer(text):
        yield match.span(), Restriction(date_column, "day", match.group(0))


def _years(
    text: str, dataset: DatasetInfo, date_column: str | None, *, taken: list[tuple[int, int]]
) -> Iterator[Restriction]:
    """Each year in `text` outside the `taken` spans (a number compared, a date): for the date
    column, or for a numeric `year` column when there is no date column."""
    year_column = next(
        (c["name"] for c in dataset.columns if c["name"].casefold() == "year" and _is_numeric(c)),
        None,
    )
    for match in YEAR.finditer(text):
        if any(start <= match.start() < end for start, end in taken):
            continue
        if date_column is None and year_column is not None:
            yield Restriction(year_column, "=", float(match.group(1)))
        else:
            yield Restriction(date_column, "year", match.group(1))


def _compared_column(before: str, dataset: DatasetInfo) -> str | None:
    """The numeric column a comparison is about: the last one named before it, else the
    only numeric column."""
    numeric = [c for c in dataset.columns if _is_numeric(c)]
    words = normalised_words(before)
    named = [
        (
            max(
                i
                for i, w in enumerate(words)
                if w in {c["name"].casefold(), f"{c['name'].casefold()}s"}
            ),
            c["name"],
        )
        for c in numeric
        if _named(c["name"], words)
    ]
    if named:
        return max(named)[1]
    return numeric[0]["name"] if len(numeric) == 1 else None


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def restriction_sql(restriction: Restriction) -> str | None:
    """The WHERE condition of one restriction (None: no column can carry it)."""
    if restriction.column is None:
        return None
    column = _ident(restriction.column)
    if restriction.op == "year":
        year = int(restriction.value)
        return f"{column} >= DATE '{year:04d}-01-01' AND {column} < DATE '{year + 1:04d}-01-01'"
    if restriction.op == "day":
        day = _day(str(restriction.value))
        if day is None:
            return None
        following = day + timedelta(days=1)
        return f"{column} >= DATE '{day.isoformat()}' AND {column} < DATE '{following.isoformat()}'"
    if isinstance(restriction.value, str):
        return f"{column} {restriction.op} {_literal(restriction.value)}"
    return f"{column} {restriction.op} {_number_text(restriction.value)}"


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def where_clause(restrictions: list[Restriction]) -> str:
    conditions = [c for c in map(restriction_sql, restrictions) if c]
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def _conditions(sql: str) -> set[tuple[str, str, object]] | None:
    """(column, op, value) of each comparison of a column with a constant that the SQL's
    WHERE clause requires (its top-level AND terms). None: the SQL cannot be read."""
    try:
        statement = sqlglot.parse_one(sql, read="duckdb")
    except (SqlglotError, RecursionError):
        return None
    where = statement.args.get("where") if isinstance(statement, exp.Select) else None
    terms: list[exp.Expression] = []
    pending = [where.this] if where is not None else []
    while pending:
        node = pending.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            pending += [node.this, node.expression]
        else:
            terms.append(node)
    conditions: set[tuple[str, str, object]] = set()
    for term in terms:
        op = OPERATORS.get(type(term))
        if op is None:
            continue
        left, right = term.this, term.expression
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            left, right, op = right, left, MIRRORED[op]
        constant = _constant(right)
        if isinstance(left, exp.Column) and constant is not None:
            conditions.add((left.name.casefold(), op, constant))
    return conditions


def _constant(node: exp.Expression) -> object:
    """A literal's value: a string (case-folded), a number, or a date's ISO text."""
    negative = False
    while isinstance(node, (exp.Paren, exp.Neg)):
        negative ^= isinstance(node, exp.Neg)
        node = node.this
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        return node.this.this
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return node.this.casefold()
    try:
        return -float(node.this) if negative else float(node.this)
    except ValueError:
        return None


def restrictions_unmet(sql: str, restrictions: list[Restriction]) -> list[Restriction]:
    """The restrictions the SQL does not carry (all of them if it cannot be read)."""
    conditions = _conditions(sql)
    if conditions is None:
        return list(restrictions)
    return [r for r in restrictions if not _met(r, conditions)]


def _met(restriction: Restriction, conditions: set[tuple[str, str, object]]) -> bool:
    if restriction.column is None:
        return False
    column = restriction.column.casefold()
    if restriction.op in ("year", "day"):
        if restriction.op == "year":
            year = int(restriction.value)
            first, after = f"{year:04d}-01-01", f"{year + 1:04d}-01-01"
        else:
            day = _day(str(restriction.value))
            if day is None:
                return False
            first, after = day.isoformat(), (day + timedelta(days=1)).isoformat()
        return (column, ">=", first) in conditions and (column, "<", after) in conditions
    value = restriction.value
    expected = value.casefold() if isinstance(value, str) else float(value)
    return (column, restriction.op, expected) in conditions
