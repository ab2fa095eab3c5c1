"""Governed SQL over dataset snapshots: allow-list, lineage, locked execution, strict loading.

Plain functions on tmp_path: the package is pure Python and needs no database fixtures.
"""

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from datasets.governed import (
    ColumnSchema,
    GovernedSqlError,
    LoadedSnapshot,
    LoadError,
    analyse,
    connections_clear,
    execute,
    load_snapshot,
    open_locked_connection,
    snapshot_cursor,
)
from tests.guards import no_hang

INVOICES = b"invoice,amount\nA-1,1250\nA-2,2750\n"


@pytest.fixture
def orders(tmp_path: Path) -> LoadedSnapshot:
    return load_snapshot(data=INVOICES, fmt="csv", table="orders", path=tmp_path / "orders.duckdb")


def test_sum_is_eligible_with_proof(orders: LoadedSnapshot) -> None:
    result = execute("SELECT SUM(amount) AS total FROM orders", snapshot=orders)

    assert result.rows == [[4000]]
    assert not result.truncated
    [column] = result.columns
    assert column.name == "total"
    assert column.label == "SUM(orders.amount)"
    assert column.lineage == ["orders.amount"]
    assert column.eligible and column.reason is None
    proof = result.proof
    assert proof.engine == "duckdb"
    assert proof.engine_version == duckdb.__version__
    assert proof.snapshot_sha256 == hashlib.sha256(INVOICES).hexdigest() == orders.sha256
    assert proof.normalised_sql == "SELECT SUM(amount) AS total FROM orders"
    canonical = json.dumps(
        [["total"], [[4000]]], sort_keys=True, separators=(",", ":"), default=str
    )
    assert proof.result_sha256 == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert proof.row_count == 1
    assert proof.duration_ms >= 0
    assert proof.executed_at.endswith("+00:00")


def test_arithmetic_on_an_aggregate_is_an_ineligible_sibling(orders: LoadedSnapshot) -> None:
    result = execute(
        "SELECT SUM(amount), SUM(amount) * 1.1 AS adjusted FROM orders", snapshot=orders
    )

    assert result.rows == [[4000, "4400.0"]]  # DECIMAL stays exact as a string
    total, adjusted = result.columns
    assert total.eligible and total.label == "SUM(orders.amount)"
    assert not adjusted.eligible
    assert adjusted.reason == "arithmetic"
    assert adjusted.label is None
    assert adjusted.lineage == ["orders.amount"]
    assert adjusted.canonical == "SUM(orders.amount) * 1.1"


def test_literal_without_from_runs_but_is_ineligible(orders: LoadedSnapshot) -> None:
    result = execute("SELECT 4000 AS total", snapshot=orders)

    assert result.rows == [[4000]]
    [column] = result.columns
    assert (column.eligible, column.reason, column.lineage) == (False, "literal", [])


def test_filtered_plain_column_is_eligible(orders: LoadedSnapshot) -> None:
    result = execute("SELECT amount FROM orders WHERE amount > 2000", snapshot=orders)

    assert result.rows == [[2750]]
    [column] = result.columns
    assert column.eligible
    assert column.label == "orders.amount WHERE orders.amount > 2000"
    assert column.lineage == ["orders.amount", "WHERE orders.amount > 2000"]


CUSTOMERS = b"invoice,amount,customer\nA-1,1250,acme\nA-2,2750,acme\nA-3,99,zeta\n"


@pytest.fixture
def customer_orders(tmp_path: Path) -> LoadedSnapshot:
    return load_snapshot(
        data=CUSTOMERS, fmt="csv", table="orders", path=tmp_path / "customers.duckdb"
    )


def test_a_filtered_aggregate_carries_its_filter_in_label_and_lineage(
    customer_orders: LoadedSnapshot,
) -> None:
    whole = execute("SELECT SUM(amount) FROM orders", snapshot=customer_orders)
    zeta = execute(
        "SELECT SUM(amount) AS total FROM orders WHERE customer = 'zeta'", snapshot=customer_orders
    )

    assert (whole.rows, zeta.rows) == ([[4099]], [[99]])
    assert whole.columns[0].label == "SUM(orders.amount)"
    [column] = zeta.columns
    assert column.label == "SUM(orders.amount) WHERE orders.customer = 'zeta'"
    assert column.lineage == [
        "orders.amount",
        "orders.customer",
        "WHERE orders.customer = 'zeta'",
    ]


def test_grouping_and_having_are_in_the_label_whichever_way_they_are_spelled(
    customer_orders: LoadedSnapshot,
) -> None:
    expected = "SUM(orders.amount) GROUP BY orders.customer HAVING COUNT(*) > 1"
    for group in ("customer", "o.customer", "1", "who"):
        result = execute(
            f"SELECT o.customer AS who, SUM(o.amount) FROM orders o GROUP BY {group} "  # noqa: S608
            "HAVING COUNT(*) > 1",
            snapshot=customer_orders,
        )
        assert result.rows == [["acme", 4000]]
        assert result.columns[1].label == expected
        assert result.columns[1].lineage == [
            "orders.*",
            "orders.amount",
            "orders.customer",
            "GROUP BY orders.customer",
            "HAVING COUNT(*) > 1",
        ]


def test_a_filter_too_long_to_label_makes_the_column_ineligible(orders: LoadedSnapshot) -> None:
    names = ", ".join(f"'{n:04}'" for n in range(80))
    result = execute(f"SELECT SUM(amount) FROM orders WHERE invoice IN ({names})", snapshot=orders)  # noqa: S608

    [column] = result.columns
    assert (column.eligible, column.label, column.reason) == (False, None, "filter too long")


def test_ineligible_forms_are_labelled_by_reason(orders: LoadedSnapshot) -> None:
    sql = (
        "SELECT CASE WHEN amount > 2000 THEN 'big' ELSE 'small' END AS size, "
        "CAST(amount AS VARCHAR) AS text, ROUND(AVG(amount), 1) AS mean, COUNT(*) AS n "
        "FROM orders GROUP BY amount ORDER BY n DESC, size"
    )
    result = execute(sql, snapshot=orders)

    grouped = "GROUP BY orders.amount"
    assert [(c.reason, c.lineage) for c in result.columns] == [
        ("case", ["orders.amount", grouped]),
        ("cast", ["orders.amount", grouped]),
        ("function", ["orders.amount", grouped]),
        (None, ["orders.*", "orders.amount", grouped]),
    ]
    assert result.columns[3].label == "COUNT(*) GROUP BY orders.amount"
    assert result.rows == [["big", "2750", 2750.0, 1], ["small", "1250", 1250.0, 1]]


def test_join_across_tables_is_analysed_with_qualified_lineage() -> None:
    tables = {"orders": ["invoice", "amount", "customer"], "customers": ["id", "name"]}
    sql = (
        "SELECT c.name, SUM(o.amount) AS total, COUNT(DISTINCT o.invoice) AS invoices, COUNT(*) "
        "FROM orders o LEFT JOIN customers AS c ON o.customer = c.id GROUP BY c.name"
    )
    normalised, columns = analyse(sql, tables=tables)

    assert normalised.startswith("SELECT c.name, SUM(o.amount) AS total")
    grouped = "GROUP BY customers.name"
    assert [(c.label, c.lineage) for c in columns] == [
        (f"customers.name {grouped}", ["customers.name", grouped]),
        (f"SUM(orders.amount) {grouped}", ["customers.name", "orders.amount", grouped]),
        (
            f"COUNT(DISTINCT orders.invoice) {grouped}",
            ["customers.name", "orders.invoice", grouped],
        ),
        (f"COUNT(*) {grouped}", ["customers.*", "customers.name", "orders.*", grouped]),
    ]
    # Unqualified names resolve across both tables; an ON may only name tables joined so far.
    assert analyse("SELECT name FROM orders JOIN customers ON customer = id", tables=tables)[1][
        0
    ].lineage == ["customers.name"]
    with pytest.raises(GovernedSqlError) as error:
        analyse(
            "SELECT name FROM orders o JOIN customers c ON o.customer = c2.id "
            "JOIN customers c2 ON c.id = c2.id",
            tables=tables,
        )
    assert error.value.code == "unknown_table"


def test_self_join_executes(orders: LoadedSnapshot) -> None:
    sql = (
        "SELECT o1.invoice, o2.amount FROM orders o1 JOIN orders o2 "
        "ON o1.invoice = o2.invoice ORDER BY o1.invoice"
    )
    result = execute(sql, snapshot=orders)

    assert result.rows == [["A-1", 1250], ["A-2", 2750]]
    assert [c.label for c in result.columns] == ["orders.invoice", "orders.amount"]


def test_rows_beyond_max_rows_are_truncated(orders: LoadedSnapshot) -> None:
    result = execute("SELECT invoice FROM orders ORDER BY invoice", snapshot=orders, max_rows=1)

    assert result.rows == [["A-1"]]
    assert result.truncated
    assert result.proof.row_count == 1


@pytest.mark.parametrize(
    ("sql", "code", "construct"),
    [
        ("SELECT 1; DROP TABLE orders", "unsupported_sql", "multiple statements"),
        ("DROP TABLE orders", "unsupported_sql", "DROP"),
        ("SELECT * FROM read_csv('/etc/passwd')", "unsupported_sql", "function read_csv"),
        ("ATTACH 'x.db'", "unsupported_sql", "ATTACH"),
        ("COPY orders TO 'out.csv'", "unsupported_sql", "COPY"),
        ("INSTALL httpfs", "unsupported_sql", "INSTALL"),
        ("LOAD httpfs", "unsupported_sql", "LOAD"),
        ("PRAGMA version", "unsupported_sql", "PRAGMA"),
        ("SET threads=4", "unsupported_sql", "SET"),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT n FROM r",
            "unsupported_sql",
            "CTE",
        ),
        (
            "SELECT amount FROM orders WHERE amount IN (SELECT amount FROM orders)",
            "unsupported_sql",
            "subquery",
        ),
        ("SELECT amount FROM (SELECT amount FROM orders)", "unsupported_sql", "subquery"),
        ("SELECT amount, SUM(amount) OVER () FROM orders", "unsupported_sql", "window function"),
        ("SELECT * FROM orders", "unsupported_sql", "star"),
        ("SELECT amount FROM orders UNION SELECT amount FROM orders", "unsupported_sql", "UNION"),
        ("SELECT getenv('HOME') FROM orders", "unsupported_sql", "function getenv"),
        ("SELECT amount FROM orders CROSS JOIN orders o2", "unsupported_sql", "cross join"),
        ("SELECT o1.amount FROM orders o1, orders o2", "unsupported_sql", "cross join"),
        ("SELECT amount FROM main.orders", "unsupported_sql", "schema-qualified table"),
        ("SELECT DISTINCT ON (amount) amount FROM orders", "unsupported_sql", "DISTINCT ON"),
        ("SELECT amount FROM orders QUALIFY amount > 1", "unsupported_sql", "QUALIFY"),
        (
            "SELECT amount FROM orders WHERE SUM(amount) > 1",
            "unsupported_sql",
            "aggregate in WHERE",
        ),
        ("SELECT price FROM orders", "unknown_column", ""),
        ("SELECT o.price FROM orders o", "unknown_column", ""),
        ("SELECT amount FROM customers", "unknown_table", ""),
        ("SELECT x.amount FROM orders", "unknown_table", ""),
        ("SELECT amount FROM orders WHERE", "invalid_sql", ""),
        (
            "SELECT amount FROM orders o1 JOIN orders o2 ON o1.invoice = o2.invoice",
            "invalid_sql",
            "",
        ),
    ],
)
def test_bad_sql_is_a_typed_error(
    orders: LoadedSnapshot, sql: str, code: str, construct: str
) -> None:
    with pytest.raises(GovernedSqlError) as error:
        execute(sql, snapshot=orders)

    assert (error.value.code, error.value.construct) == (code, construct)
    assert str(orders.path) not in str(error.value)


def test_query_longer_than_the_limit_is_refused_before_parsing(orders: LoadedSnapshot) -> None:
    sql = "SELECT amount FROM orders WHERE " + " OR ".join(["amount = 1"] * 100_000)  # noqa: S608 (constant text)
    assert len(sql) > 1_000_000

    with pytest.raises(GovernedSqlError) as error:
        execute(sql, snapshot=orders)
    assert error.value.code == "too_large"


def test_execution_failure_hides_duckdb_text(orders: LoadedSnapshot) -> None:
    with pytest.raises(GovernedSqlError) as error:
        execute("SELECT CAST(invoice AS INTEGER) FROM orders", snapshot=orders)

    assert error.value.code == "execution_failed"
    assert "Conversion Error" not in str(error.value) and str(orders.path) not in str(error.value)


def _big(tmp_path: Path) -> LoadedSnapshot:
    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute(
            "CREATE TABLE orders AS "
            "SELECT i AS invoice, i % 1000 AS amount FROM range(3000000) t(i)"
        )
    return LoadedSnapshot(
        path=path,
        table="orders",
        row_count=3_000_000,
        columns=[ColumnSchema("invoice", "BIGINT"), ColumnSchema("amount", "BIGINT")],
        sha256="0" * 64,
    )


SLOW = "SELECT COUNT(*) FROM orders o1 JOIN orders o2 ON o1.amount = o2.amount"


def test_long_query_is_interrupted(tmp_path: Path) -> None:
    snapshot = _big(tmp_path)

    with no_hang(), pytest.raises(GovernedSqlError) as error:  # uninterrupted, it never ends
        execute(SLOW, snapshot=snapshot, timeout_s=0.5)
    assert error.value.code == "timeout"


def test_one_watchdog_thread_watches_every_query(tmp_path: Path) -> None:
    snapshot = _big(tmp_path)
    for _ in range(5):
        assert execute("SELECT COUNT(*) FROM orders", snapshot=snapshot).rows == [[3_000_000]]
    watchdogs = [t for t in threading.enumerate() if t.name == "governed-sql-timeout"]
    assert len(watchdogs) == 1 and watchdogs[0].is_alive()  # not one started per query


def test_each_query_keeps_its_own_deadline(tmp_path: Path) -> None:
    snapshot = _big(tmp_path)
    outcome: dict[str, object] = {}

    def slow() -> None:
        try:
            execute(SLOW, snapshot=snapshot, timeout_s=0.5)
        except GovernedSqlError as error:
            outcome["slow"] = error.code

    runner = threading.Thread(target=slow)
    runner.start()
    # Queries that start and end while the slow one is watched are not interrupted ...
    while runner.is_alive():
        assert execute("SELECT COUNT(*) FROM orders", snapshot=snapshot, timeout_s=60).rows
    runner.join()
    assert outcome == {"slow": "timeout"}  # ... and the slow one still was, on time
    assert execute("SELECT COUNT(*) FROM orders", snapshot=snapshot).rows == [[3_000_000]]


_FORKED = """
import os, sys
from pathlib import Path
from datasets.governed import ColumnSchema, GovernedSqlError, LoadedSnapshot, execute

columns = [ColumnSchema("invoice", "BIGINT"), ColumnSchema("amount", "BIGINT")]
parent, child = (LoadedSnapshot(path=Path(path), table="orders", row_count=3_000_000,
                                columns=columns, sha256="0" * 64) for path in sys.argv[1:3])
execute("SELECT COUNT(*) FROM orders", snapshot=parent)  # the parent's watchdog runs
pid = os.fork()
if pid == 0:
    try:
        execute(sys.argv[3], snapshot=child, timeout_s=0.5)
    except GovernedSqlError as error:
        os._exit(0 if error.code == "timeout" else 2)
    os._exit(3)  # ran to the end: nobody interrupted it
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_forked_child_gets_a_watchdog_of_its_own(tmp_path: Path) -> None:
    # In a process of its own: forking this one, with the suite's DuckDB connections and
    # threads, is not what a Celery prefork worker does. The child reads another file (a
    # DuckDB connection the parent opened is not the child's).
    snapshot = _big(tmp_path)
    copy = tmp_path / "child.duckdb"
    copy.write_bytes(snapshot.path.read_bytes())
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, "-c", _FORKED, str(snapshot.path), str(copy), SLOW],
        cwd=root,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0


@pytest.mark.parametrize(
    "statement",
    [
        "ATTACH 'other.db' AS other",
        "COPY orders TO 'out.csv'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET memory_limit = '4GB'",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "CREATE TABLE stolen AS SELECT 1",
    ],
)
@pytest.mark.parametrize("how", ["connection", "warm cursor"])
def test_locked_connection_refuses_escapes_even_when_called_directly(
    orders: LoadedSnapshot,
    statement: str,
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths would land here if anything got written
    if how == "connection":
        conn = open_locked_connection(orders.path)
    else:  # the cursor a query gets from the warm, cached connection
        conn = snapshot_cursor(orders.path)
    try:
        with pytest.raises(duckdb.Error):
            conn.execute(statement).fetchall()
        assert conn.execute("SELECT current_setting('lock_configuration')").fetchone() == (True,)
        assert conn.execute("SELECT SUM(amount) FROM orders").fetchone() == (4000,)
    finally:
        conn.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orders.duckdb"]


def test_ragged_csv_is_malformed_and_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ragged.duckdb"
    with pytest.raises(LoadError) as error:
        load_snapshot(data=b"a,b\n1,2\n3\n4,5,6\n", fmt="csv", table="t", path=path)

    assert error.value.code == "malformed_csv"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"name,city\nJos\xe9,Porto\n", "bad_encoding"),
        (b"", "empty_file"),
        (b"\n\n", "empty_file"),
        (b"amount,Amount\n1,2\n", "duplicate_columns"),
        (b"a,b\n1,2\n3,x,y\n", "malformed_csv"),
    ],
)
def test_bad_csv_is_a_typed_load_error(tmp_path: Path, data: bytes, code: str) -> None:
    with pytest.raises(LoadError) as error:
        load_snapshot(data=data, fmt="csv", table="t", path=tmp_path / "t.duckdb")

    assert error.value.code == code
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("table", ["1bad", "select", "a-b", "", "x" * 64, "order"])
def test_invalid_table_names_are_refused(tmp_path: Path, table: str) -> None:
    with pytest.raises(LoadError) as error:
        load_snapshot(data=INVOICES, fmt="csv", table=table, path=tmp_path / "t.duckdb")

    assert error.value.code == "invalid_table_name"


def test_loading_onto_an_existing_path_is_refused(orders: LoadedSnapshot) -> None:
    before = orders.path.read_bytes()
    with pytest.raises(FileExistsError):
        load_snapshot(data=b"x\n1\n", fmt="csv", table="orders", path=orders.path)
    assert orders.path.read_bytes() == before


def test_too_many_rows_is_too_large(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as error:
        load_snapshot(data=INVOICES, fmt="csv", table="t", path=tmp_path / "t.db", max_rows=1)
    assert error.value.code == "too_large"
    assert list(tmp_path.iterdir()) == []


def test_second_load_leaves_the_first_snapshot_unchanged(
    orders: LoadedSnapshot, tmp_path: Path
) -> None:
    first_file = hashlib.sha256(orders.path.read_bytes()).hexdigest()
    first_result = execute("SELECT SUM(amount) FROM orders", snapshot=orders).proof.result_sha256

    other = load_snapshot(
        data=b"invoice,amount\nB-1,1\n", fmt="csv", table="orders", path=tmp_path / "b.duckdb"
    )

    assert hashlib.sha256(orders.path.read_bytes()).hexdigest() == first_file
    assert execute("SELECT SUM(amount) FROM orders", snapshot=orders).proof.result_sha256 == (
        first_result
    )
    assert execute("SELECT SUM(amount) FROM orders", snapshot=other).rows == [[1]]


def test_a_nul_in_a_parquet_text_cell_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    with duckdb.connect() as conn:
        rows = "SELECT 'A' || chr(0) || '-1' AS invoice, 1250 AS amount"
        conn.execute(f"COPY ({rows}) TO '{source}' (FORMAT parquet)")
    data = source.read_bytes()
    source.unlink()
    with pytest.raises(LoadError) as error:
        load_snapshot(data=data, fmt="parquet", table="t", path=tmp_path / "t.duckdb")

    assert (error.value.code, str(error.value)) == (
        "unsupported_type",
        "column invoice contains a NUL byte",
    )
    assert list(tmp_path.iterdir()) == []


def test_parquet_loads(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    with duckdb.connect() as conn:
        rows = "SELECT 'A-' || i AS invoice, i * 10 AS amount, DATE '2024-01-01' + i::INT AS day"
        # The path is tmp_path's, not input; COPY takes no parameter for its target.
        conn.execute(f"COPY ({rows} FROM range(5) t(i)) TO '{source}' (FORMAT parquet)")
    data = source.read_bytes()

    snapshot = load_snapshot(data=data, fmt="parquet", table="orders", path=tmp_path / "p.duckdb")

    assert snapshot.row_count == 5
    assert snapshot.sha256 == hashlib.sha256(data).hexdigest()
    assert [c.name for c in snapshot.columns] == ["invoice", "amount", "day"]
    result = execute("SELECT SUM(amount), MAX(day) AS last FROM orders", snapshot=snapshot)
    assert result.rows == [[100, "2024-01-05"]]


def test_corrupt_parquet_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as error:
        load_snapshot(data=b"PAR1 not really", fmt="parquet", table="t", path=tmp_path / "t.db")

    assert error.value.code == "unsupported_type"
    assert list(tmp_path.iterdir()) == []


def test_comments_never_reach_duckdb(orders: LoadedSnapshot) -> None:
    result = execute("SELECT SUM(amount) /* note */ AS total FROM orders -- tail", snapshot=orders)

    assert result.proof.normalised_sql == "SELECT SUM(amount) AS total FROM orders"


def test_package_does_not_import_django() -> None:
    code = "import sys, datasets.governed; sys.exit('django' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root, check=False).returncode == 0


def test_governed_queries_reuse_one_warm_connection_per_snapshot(orders: LoadedSnapshot) -> None:
    """A query opens no new connection to a snapshot it read before (the cost the issue
    measured), and the cache stays bounded."""
    from datasets.governed import engine

    connections_clear()
    opened = []
    original = engine.open_locked_connection

    def counting(*args, **kwargs):
        opened.append(args[0])
        return original(*args, **kwargs)

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(engine, "open_locked_connection", counting)
    try:
        for _ in range(3):
            result = execute("SELECT SUM(amount) FROM orders", snapshot=orders)
            assert result.rows == [[4000]]
        assert opened == [orders.path]
        assert len(engine._connections) == 1
    finally:
        monkeypatch.undo()
        connections_clear()
