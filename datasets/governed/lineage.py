"""Which source columns each output column comes from, and whether it is *eligible*.

An eligible column is one whose value a reader can check against the snapshot by a single,
named operation: a plain column or a supported aggregate over a plain column. Anything that
computes on top of that (arithmetic, CASE, CAST, scalar functions, literals) still executes,
but is a "synthetic sibling": it carries lineage so a reader sees what it was built from, and
``eligible=False`` with a reason so it is never presented as evidence by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from datasets.governed.parse import (
    AGGREGATES,
    ARITHMETIC,
    LITERALS,
    PREDICATES,
    SCALAR_FUNCTIONS,
    ValidatedQuery,
    is_literal,
    parse_statement,
    validate,
)

_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class OutputColumn:
    name: str  # DuckDB's column name after execute(); the alias or sqlglot's text in analyse()
    label: str | None  # e.g. "SUM(orders.amount)", "orders.amount", "COUNT(*)"; None if ineligible
    lineage: list[str]  # sorted, distinct source "table.column"s ("table.*" for COUNT(*))
    canonical: str  # the expression as SQL with columns qualified by their real table
    eligible: bool
    reason: str | None  # why ineligible: literal, arithmetic, case, cast, function, ...


def analyse(
    sql: str, *, tables: dict[str, list[str]], max_sql_chars: int = 20_000
) -> tuple[str, list[OutputColumn]]:
    """Parse, allow-list and describe ``sql`` without executing it.

    ``tables`` maps each table name to its column names. Returns the normalised SQL (what
    ``execute`` runs) and one ``OutputColumn`` per projection. Raises ``GovernedSqlError``.
    """
    select = parse_statement(sql, max_sql_chars=max_sql_chars)
    query = validate(select, tables)
    # comments=False: comments are the one part of the input not covered by the allow-list.
    normalised = select.sql(dialect="duckdb", pretty=False, comments=False)
    return normalised, describe(query)


def describe(query: ValidatedQuery) -> list[OutputColumn]:
    columns = []
    for projection in query.select.expressions:
        expression = projection.this if type(projection) is exp.Alias else projection
        name = projection.alias if type(projection) is exp.Alias else projection.output_name
        label, reason = _classify(_unwrap(expression), query)
        columns.append(
            OutputColumn(
                name=name or expression.sql(dialect="duckdb", comments=False),
                label=label,
                lineage=_lineage(expression, query),
                canonical=_canonical(expression, query),
                eligible=label is not None,
                reason=reason,
            )
        )
    return columns


def _unwrap(node: exp.Expression) -> exp.Expression:
    while type(node) is exp.Paren:
        node = node.this
    return node


def _source(node: exp.Expression, query: ValidatedQuery) -> str | None:
    """``table.column`` for a plain resolved column, else None."""
    node = _unwrap(node)
    if type(node) is exp.Column and id(node) in query.resolved:
        return "{}.{}".format(*query.resolved[id(node)])
    return None


def _classify(node: exp.Expression, query: ValidatedQuery) -> tuple[str | None, str | None]:
    """(label, None) for an eligible expression, (None, reason) otherwise."""
    kind = type(node)
    if kind is exp.Column:
        source = _source(node, query)
        return (source, None) if source else (None, "alias reference")
    if kind in AGGREGATES:
        function, argument = AGGREGATES[kind], node.this
        if type(argument) is exp.Star:
            # COUNT(*) counts rows of every table read; with no FROM it counts nothing real.
            return ("COUNT(*)", None) if query.source_tables else (None, "no source table")
        distinct = type(argument) is exp.Distinct
        source = _source(argument.expressions[0] if distinct else argument, query)
        if source is None:
            return None, "aggregate of expression"
        return f"{function}({'DISTINCT ' if distinct else ''}{source})", None
    if is_literal(node) or kind in LITERALS:
        return None, "literal"
    if kind in ARITHMETIC:
        return None, "arithmetic"
    if kind is exp.Case:
        return None, "case"
    if kind is exp.Cast:
        return None, "cast"
    if kind in SCALAR_FUNCTIONS:
        return None, "function"
    if kind in PREDICATES:
        return None, "predicate"
    return None, kind.__name__.lower()  # unreachable for validated queries; stays ineligible


def _lineage(node: exp.Expression, query: ValidatedQuery) -> list[str]:
    sources = set()
    for child in node.walk():
        if type(child) is exp.Column and id(child) in query.resolved:
            sources.add("{}.{}".format(*query.resolved[id(child)]))
        elif type(child) is exp.Count and type(child.this) is exp.Star:
            sources.update(f"{table}.*" for table in query.source_tables)
    return sorted(sources)


def _identifier(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=not _PLAIN_IDENTIFIER.fullmatch(name))


def _canonical(node: exp.Expression, query: ValidatedQuery) -> str:
    """The expression with every column written as its real ``table.column``.

    The copy has the same shape as the original, so walking both in step maps each original
    column node (whose id() the validator recorded) onto its copy.
    """
    copy = node.copy()
    replacements = []
    for original, copied in zip(node.walk(), copy.walk(), strict=True):
        if type(original) is exp.Column and id(original) in query.resolved:
            table, column = query.resolved[id(original)]
            replacements.append(
                (copied, exp.Column(this=_identifier(column), table=_identifier(table)))
            )
    for copied, qualified in replacements:
        if copied is copy:
            copy = qualified
        else:
            copied.replace(qualified)
    return copy.sql(dialect="duckdb", comments=False)
