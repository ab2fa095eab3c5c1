"""Allow-list validation of one read-only SELECT over a snapshot's tables.

Every node type, and every argument of it, must be named here to pass: sqlglot keeps growing
new node types and flags, and anything this module does not know must fail closed rather than
reach DuckDB. Column references are resolved against the FROM/JOIN tables as they go, so
lineage can later report real ``table.column`` names whatever aliases the query used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError


class GovernedSqlError(Exception):
    """A query was refused or failed; ``str(error)`` is safe to show to the user who wrote it."""

    def __init__(self, code: str, message: str, *, construct: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.construct = construct


def unsupported(construct: str) -> GovernedSqlError:
    return GovernedSqlError(
        "unsupported_sql", f"unsupported SQL construct: {construct}", construct=construct
    )


AGGREGATES: dict[type[exp.Expression], str] = {
    exp.Count: "COUNT",
    exp.Sum: "SUM",
    exp.Avg: "AVG",
    exp.Min: "MIN",
    exp.Max: "MAX",
}
# Scalar functions that execute but make a column ineligible ("synthetic sibling").
SCALAR_FUNCTIONS: frozenset[type[exp.Expression]] = frozenset(
    {exp.Round, exp.Abs, exp.Lower, exp.Upper, exp.Coalesce, exp.Length}
)
ARITHMETIC: frozenset[type[exp.Expression]] = frozenset(
    {exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg}
)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Like, exp.ILike)
PREDICATES: frozenset[type[exp.Expression]] = frozenset(
    {*_COMPARISONS, exp.And, exp.Or, exp.Not, exp.In, exp.Between, exp.Is}
)
LITERALS: frozenset[type[exp.Expression]] = frozenset({exp.Literal, exp.Boolean, exp.Null})

# Node type -> argument keys holding child expressions to validate. Any other argument that is
# set makes the node unsupported, unless _FLAGS lists it.
_UNARY = (exp.Paren, exp.Neg, exp.Not, exp.Abs, exp.Lower, exp.Upper, exp.Length)
_BINARY = (*_COMPARISONS, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.And, exp.Or)
_CHILDREN: dict[type[exp.Expression], tuple[str, ...]] = {
    **dict.fromkeys((*_UNARY, exp.In, exp.Is, exp.Cast), ("this",)),
    **dict.fromkeys(_BINARY, ("this", "expression")),
    exp.Round: ("this", "decimals"),
    exp.Coalesce: ("this", "expressions"),
    exp.Between: ("this", "low", "high"),
}
# Arguments checked by hand (In, Is, Cast), or parser flags that only steer SQL generation
# (NOT LIKE, DuckDB's BIGINT count, `/` typing) and add no behaviour of their own.
_FLAGS: dict[type[exp.Expression], frozenset[str]] = {
    exp.In: frozenset({"expressions"}),
    exp.Is: frozenset({"expression"}),
    exp.Cast: frozenset({"to"}),
    exp.Like: frozenset({"negate"}),
    exp.ILike: frozenset({"negate"}),
    exp.Div: frozenset({"typed", "safe"}),
    exp.Count: frozenset({"big_int"}),
    exp.Literal: frozenset({"this", "is_string"}),
    exp.Boolean: frozenset({"this"}),
}
_AGG_CONTEXTS = frozenset({"SELECT", "HAVING", "ORDER BY"})
_ALIAS_CONTEXTS = frozenset({"HAVING", "ORDER BY", "GROUP BY"})
_CLAUSES = ("from_", "joins", "where", "group", "having", "order", "limit", "offset", "distinct")
_CLAUSE_NAMES = {"with_": "CTE", "windows": "window function", "laterals": "LATERAL"}


def construct_name(node: exp.Expr) -> str:
    """A short human name for a refused node."""
    if isinstance(node, exp.Subquery | exp.Query | exp.Exists):
        return "subquery"
    if isinstance(node, exp.Window):
        return "window function"
    if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star):
        return "star"
    if isinstance(node, exp.Placeholder | exp.Parameter):
        return "parameter"
    if isinstance(node, exp.Anonymous):
        return f"function {node.name.lower()}"
    if isinstance(node, exp.Func):
        return f"function {node.sql_name().lower()}"
    return node.key.upper()


def _present(value: object) -> bool:
    return value is not None and value is not False and value != []


def _check_args(node: exp.Expression, allowed: Iterable[str]) -> None:
    allowed = set(allowed) | _FLAGS.get(type(node), frozenset())
    for key, value in node.args.items():
        if _present(value) and key not in allowed:
            raise unsupported(f"{construct_name(node)} {key.rstrip('_').upper()}")


def _is_integer(node: exp.Expression | None) -> bool:
    return type(node) is exp.Literal and not node.is_string and node.this.isdigit()


def is_literal(node: exp.Expression) -> bool:
    """Constants: plain literals, negated numbers, and typed literals such as DATE '2024-01-01'."""
    while type(node) in (exp.Paren, exp.Neg):
        node = node.this
    if type(node) is exp.Cast and isinstance(node.to, exp.DataType):
        return is_literal(node.this)
    return type(node) in LITERALS


@dataclass
class ValidatedQuery:
    select: exp.Select
    # id() of each source-column node -> (real table name, real column name).
    resolved: dict[int, tuple[str, str]] = field(default_factory=dict)
    # Real table names read, in FROM/JOIN order, without repeats (for COUNT(*) lineage).
    source_tables: list[str] = field(default_factory=list)


def parse_statement(sql: str, *, max_sql_chars: int) -> exp.Select:
    """Exactly one plain SELECT statement, or a typed error."""
    if len(sql) > max_sql_chars:  # checked before parsing: the parser's cost grows with input
        raise GovernedSqlError("too_large", f"the query is longer than {max_sql_chars} characters")
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except SqlglotError as exc:
        raise GovernedSqlError("invalid_sql", "the query could not be parsed") from exc
    except RecursionError as exc:
        raise GovernedSqlError("too_large", "the query is nested too deeply") from exc
    if not statements:
        raise GovernedSqlError("invalid_sql", "the query is empty")
    if len(statements) > 1:
        raise unsupported("multiple statements")
    statement = statements[0]
    if type(statement) is exp.Command:  # sqlglot's fallback for syntax it does not model
        raise unsupported(str(statement.this).upper())
    if isinstance(statement, exp.SetOperation):
        raise unsupported(statement.key.upper())
    if type(statement) is not exp.Select:
        raise unsupported(construct_name(statement))
    return statement


class _Validator:
    def __init__(self, select: exp.Select, tables: dict[str, list[str]]) -> None:
        # DuckDB identifiers are case-insensitive even when quoted, so look up lowercased.
        self.catalog = {t.lower(): (t, {c.lower(): c for c in cols}) for t, cols in tables.items()}
        self.sources: dict[str, str] = {}  # alias (lowercase) -> real table name
        self.aliases: set[str] = set()  # output aliases, referable in HAVING/ORDER BY/GROUP BY
        self.query = ValidatedQuery(select)

    def run(self) -> ValidatedQuery:
        """Every clause in the order a reader meets them: the sources first, so each column
        reference after them resolves."""
        args = self.query.select.args
        self._clauses()
        if args.get("from_"):
            self._add_source(args["from_"].this)
        for join in args.get("joins") or []:
            self._join(join)
        self._projections()
        if args.get("where"):
            self.expr(args["where"].this, "WHERE")
        self._groupings()
        if args.get("having"):
            self.expr(args["having"].this, "HAVING")
        self._limits()
        return self.query

    def _clauses(self) -> None:
        """Only the clauses named in _CLAUSES, no DISTINCT ON, and FROM/WHERE/HAVING bare."""
        args = self.query.select.args
        for key, value in args.items():
            if _present(value) and key not in (*_CLAUSES, "expressions"):
                raise unsupported(_CLAUSE_NAMES.get(key, key.rstrip("_").upper()))
        if args.get("distinct") and _present(args["distinct"].args.get("on")):
            raise unsupported("DISTINCT ON")
        for key in ("from_", "where", "having"):  # wrappers with one child, nothing else
            if args.get(key):
                _check_args(args[key], ("this",))

    def _projections(self) -> None:
        """The select list; each output alias becomes referable in later clauses."""
        for projection in self.query.select.expressions:
            if type(projection) is exp.Alias:
                _check_args(projection, ("this", "alias"))
                self.aliases.add(projection.alias.lower())
                projection = projection.this
            self.expr(projection, "SELECT")

    def _groupings(self) -> None:
        select = self.query.select
        for key, context in (("group", "GROUP BY"), ("order", "ORDER BY")):
            if select.args.get(key):
                _check_args(select.args[key], ("expressions",))
                for item in select.args[key].expressions:
                    self._grouping(item, context, len(select.expressions))

    def _limits(self) -> None:
        """LIMIT and OFFSET: integer literals only."""
        args = self.query.select.args
        for key in ("limit", "offset"):
            if args.get(key):
                _check_args(args[key], ("expression",))
                if not _is_integer(args[key].args.get("expression")):
                    raise unsupported(f"{key.upper()} other than an integer literal")

    def _add_source(self, table: exp.Expression) -> None:
        if type(table) is not exp.Table:
            raise unsupported(construct_name(table))
        if not isinstance(table.this, exp.Identifier):
            raise unsupported(construct_name(table.this))  # read_csv(...), glob(...), ...
        if table.args.get("db") or table.args.get("catalog"):
            raise unsupported("schema-qualified table")
        _check_args(table, ("this", "alias"))
        alias = table.args.get("alias")
        if alias is not None:
            _check_args(alias, ("this",))  # `t AS x(a, b)` would rename columns under us
        entry = self.catalog.get(table.name.lower())
        if entry is None:
            raise GovernedSqlError("unknown_table", f"unknown table: {table.name}")
        key = (table.alias or table.name).lower()
        if key in self.sources:
            raise GovernedSqlError("invalid_sql", f"table name or alias used twice: {key}")
        self.sources[key] = entry[0]
        if entry[0] not in self.query.source_tables:
            self.query.source_tables.append(entry[0])

    def _join(self, join: exp.Join) -> None:
        method, side, kind = (
            str(join.args.get(k) or "").upper() for k in ("method", "side", "kind")
        )
        if method:
            raise unsupported(f"{method} join")
        if kind == "CROSS" or not (join.args.get("on") or join.args.get("using")):
            raise unsupported("cross join")  # also comma joins, which carry no condition
        if join.args.get("using"):
            raise unsupported("JOIN USING")
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER" if side else ""):
            raise unsupported(f"{side or kind} join")
        _check_args(join, ("this", "on", "side", "kind"))
        self._add_source(join.this)
        self._join_condition(join.args["on"])

    def _join_condition(self, node: exp.Expression) -> None:
        # Only column = column equalities joined by AND: the joins whose meaning lineage can state.
        if type(node) is exp.Paren:
            return self._join_condition(node.this)
        if type(node) is exp.And:
            self._join_condition(node.this)
            return self._join_condition(node.expression)
        if type(node) is exp.EQ and {type(node.this), type(node.expression)} == {exp.Column}:
            return self.expr(node, "ON")
        raise unsupported("join condition other than column equality")

    def _grouping(self, node: exp.Expression, context: str, width: int) -> None:
        if context == "ORDER BY":
            if type(node) is not exp.Ordered:
                raise unsupported(construct_name(node))
            _check_args(node, ("this", "desc", "nulls_first"))
            node = node.this
        if _is_integer(node):
            if not 1 <= int(node.this) <= width:  # a position in the select list
                raise GovernedSqlError("invalid_sql", f"{context} position out of range")
            return
        if context == "GROUP BY" and type(node) is not exp.Column:
            raise unsupported("GROUP BY expression")
        self.expr(node, context)

    def expr(self, node: exp.Expression, context: str, in_aggregate: bool = False) -> None:
        kind = type(node)
        if type(node) is exp.Column:
            return self._column(node, context)
        if kind in AGGREGATES:
            return self._aggregate(node, context, in_aggregate)
        if type(node) is exp.Case:
            return self._case(node, context, in_aggregate)
        if kind is exp.In and node.args.get("query") is not None:
            raise unsupported("subquery")
        if kind is exp.In and not (node.expressions and all(map(is_literal, node.expressions))):
            raise unsupported("IN with anything but a list of literals")
        if kind is exp.Is and type(node.expression) not in (exp.Null, exp.Boolean):
            raise unsupported("IS with anything but NULL, TRUE or FALSE")
        if type(node) is exp.Cast and not isinstance(node.to, exp.DataType):
            raise unsupported("CAST")
        if kind not in _CHILDREN and kind not in LITERALS:
            raise unsupported(construct_name(node))
        children = _CHILDREN.get(kind, ())
        _check_args(node, children)
        for key in children:
            value = node.args.get(key)
            for child in value if isinstance(value, list) else [value]:
                if child is not None:
                    self.expr(child, context, in_aggregate)
        return None

    def _case(self, node: exp.Case, context: str, in_aggregate: bool) -> None:
        _check_args(node, ("this", "ifs", "default"))
        for key in ("this", "default"):
            if node.args.get(key) is not None:
                self.expr(node.args[key], context, in_aggregate)
        for branch in node.args.get("ifs") or []:
            if type(branch) is not exp.If:
                raise unsupported(construct_name(branch))
            _check_args(branch, ("this", "true"))
            self.expr(branch.this, context, in_aggregate)
            self.expr(branch.args["true"], context, in_aggregate)

    def _aggregate(self, node: exp.Expression, context: str, in_aggregate: bool) -> None:
        name = AGGREGATES[type(node)]
        if context not in _AGG_CONTEXTS:
            raise unsupported(f"aggregate in {context}")
        if in_aggregate:
            raise unsupported("nested aggregate")
        _check_args(node, ("this",))
        argument = node.this
        if argument is None:
            raise unsupported(f"{name}() without an argument")
        if type(argument) is exp.Star:
            if name != "COUNT":
                raise unsupported("star")
            return None
        if type(argument) is exp.Distinct:
            if name != "COUNT":
                raise unsupported(f"DISTINCT in {name}")
            _check_args(argument, ("expressions",))
            if len(argument.expressions) != 1:
                raise unsupported("COUNT(DISTINCT ...) over several expressions")
            argument = argument.expressions[0]
        self.expr(argument, context, in_aggregate=True)
        return None

    def _column(self, node: exp.Column, context: str) -> None:
        if node.is_star:
            raise unsupported("star")
        if not isinstance(node.this, exp.Identifier):
            raise unsupported(construct_name(node.this))
        if node.args.get("db") or node.args.get("catalog"):
            raise unsupported("schema-qualified column")
        _check_args(node, ("this", "table"))
        name, qualifier = node.name.lower(), node.table.lower()
        if qualifier:
            if qualifier not in self.sources:
                raise GovernedSqlError("unknown_table", f"unknown table or alias: {node.table}")
            candidates = [qualifier]
        else:
            candidates = [a for a, t in self.sources.items() if name in self.catalog[t.lower()][1]]
        if len(candidates) > 1:
            raise GovernedSqlError("invalid_sql", f"ambiguous column: {node.name}")
        if candidates:
            table = self.sources[candidates[0]]
            column = self.catalog[table.lower()][1].get(name)
            if column is not None:
                self.query.resolved[id(node)] = (table, column)
                return
        elif context in _ALIAS_CONTEXTS and name in self.aliases:
            return  # a reference to an output alias, resolved by DuckDB
        raise GovernedSqlError("unknown_column", f"unknown column: {node.sql(dialect='duckdb')}")


def validate(select: exp.Select, tables: dict[str, list[str]]) -> ValidatedQuery:
    """Check ``select`` against the allow-list; resolve every column to its source table."""
    try:
        return _Validator(select, tables).run()
    except RecursionError as exc:
        raise GovernedSqlError("too_large", "the query is nested too deeply") from exc
