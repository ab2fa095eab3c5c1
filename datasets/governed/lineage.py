"""Which source columns each output column comes from, and whether it is *eligible*.

An eligible column is one whose value a reader can check against the snapshot by a single,
named operation: a plain column or a supported aggregate over a plain column. Anything that
computes on top of that (arithmetic, CASE, CAST, scalar functions, literals) still executes,
but is a "synthetic sibling": it carries lineage so a reader sees what it was built from, and
``eligible=False`` with a reason so it is never presented as evidence by itself.

A value means nothing without the rows it was computed over, so the label and the lineage of
every output column carry the query's WHERE, GROUP BY and HAVING clauses:
``SUM(orders.amount) WHERE orders.customer = 'zeta'`` is never labelled like the unfiltered sum.
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
# Candidate facts store their label in 300 characters; a longer one cannot be cited whole.
MAX_LABEL_CHARS = 300


@dataclass(frozen=True)
class OutputColumn:
    name: str  # DuckDB's column name after execute(); the alias or sqlglot's text in analyse()
    # e.g. "SUM(orders.amount) WHERE orders.customer = 'zeta'", "COUNT(*)"; None if ineligible
    label: str | None
    # sorted, distinct source "table.column"s ("table.*" for COUNT(*)) of the expression and of
    # every filter, then the filter clauses themselves ("WHERE …", "GROUP BY …", "HAVING …")
    lineage: list[str]
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
    filters, filter_nodes = _filters(query)
    filter_sources = set().union(*(_lineage(node, query) for node in filter_nodes))
    columns = []
    for projection in query.select.expressions:
        expression = projection.this if type(projection) is exp.Alias else projection
        name = projection.alias if type(projection) is exp.Alias else projection.output_name
        label, reason = _classify(_unwrap(expression), query)
        if label is not None and filters:
            label = " ".join([label, *filters])
        if label is not None and len(label) > MAX_LABEL_CHARS:
            label, reason = None, "filter too long"
        columns.append(
            OutputColumn(
                name=name or expression.sql(dialect="duckdb", comments=False),
                label=label,
                lineage=[*sorted({*_lineage(expression, query), *filter_sources}), *filters],
                canonical=_canonical(expression, query),
                eligible=label is not None,
                reason=reason,
            )
        )
    return columns


def _filters(query: ValidatedQuery) -> tuple[list[str], list[exp.Expression]]:
    """The clauses that choose the rows a value is computed over, as canonical SQL.

    GROUP BY positions and output aliases are replaced by the projection they name, so the
    clause reads the same whichever way the query spelled it.
    """
    args = query.select.args
    clauses, nodes = [], []
    if args.get("where"):
        nodes.append(args["where"].this)
        clauses.append(f"WHERE {_canonical(args['where'].this, query)}")
    if args.get("group"):
        terms = [_grouping_target(item, query) for item in args["group"].expressions]
        nodes.extend(terms)
        clauses.append("GROUP BY " + ", ".join(_canonical(term, query) for term in terms))
    if args.get("having"):
        nodes.append(args["having"].this)
        clauses.append(f"HAVING {_canonical(args['having'].this, query)}")
    return clauses, nodes


def _grouping_target(node: exp.Expression, query: ValidatedQuery) -> exp.Expression:
    projections = query.select.expressions
    if type(node) is exp.Literal and not node.is_string and node.this.isdigit():
        node = projections[int(node.this) - 1]  # the validator checked the range
    elif type(node) is exp.Column and id(node) not in query.resolved:
        node = next(p for p in projections if p.alias_or_name.lower() == node.name.lower())
    return node.this if type(node) is exp.Alias else node


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
