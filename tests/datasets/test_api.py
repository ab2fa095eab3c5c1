"""Datasets over REST: immutable snapshots, governed queries, facts and permissions."""

import hashlib

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from datasets.models import Dataset, DatasetSnapshot, GovernedQuery
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

INVOICES = b"invoice,amount\nA-1,1250\nA-2,2750\n"


def upload(user, space, data: bytes = INVOICES, name: str = "invoices.csv", **fields):
    return client_for(user).post(
        "/v1/datasets",
        {"file": SimpleUploadedFile(name, data), "space": space.pk, "table": "orders", **fields},
        format="multipart",
    )


def query(user, dataset_id: int, sql: str, **fields):
    return client_for(user).post(
        f"/v1/datasets/{dataset_id}/query", {"sql": sql, **fields}, format="json"
    )


@pytest.fixture
def invoices(space, owner) -> int:
    response = upload(owner, space)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_upload_creates_an_immutable_snapshot(space, owner, invoices):
    dataset = Dataset.objects.get(pk=invoices)
    snapshot = dataset.current_snapshot
    assert (snapshot.version, snapshot.table_name, snapshot.row_count) == (1, "orders", 2)
    assert snapshot.sha256 == hashlib.sha256(INVOICES).hexdigest()
    assert [column["name"] for column in snapshot.schema] == ["invoice", "amount"]
    assert (settings.DATASETS_ROOT / snapshot.db_path).exists()


def test_sum_of_invoices_is_4000_with_lineage_proof_and_one_fact(space, member, invoices):
    response = query(member, invoices, "SELECT SUM(amount) AS total FROM orders")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["label"] == "unverified"
    assert body["rows"] == [[4000]]
    column = body["columns"][0]
    assert (column["label"], column["lineage"], column["eligible"]) == (
        "SUM(orders.amount)",
        ["orders.amount"],
        True,
    )
    proof = body["proof"]
    assert proof["engine"] == "duckdb" and proof["engine_version"]
    assert proof["snapshot_sha256"] == hashlib.sha256(INVOICES).hexdigest()
    assert proof["row_count"] == 1 and proof["normalised_sql"]
    [fact] = body["facts"]
    assert (fact["value"], fact["label"], fact["lineage"]) == (
        4000,
        "SUM(orders.amount)",
        ["orders.amount"],
    )
    recorded = GovernedQuery.objects.get(pk=body["query_id"])
    assert fact["query_id"] == recorded.pk and recorded.result_sha256 == proof["result_sha256"]
    assert fact["snapshot_sha256"] == proof["snapshot_sha256"]


def test_a_synthetic_sibling_column_is_never_a_fact(space, member, invoices):
    body = query(
        member, invoices, "SELECT SUM(amount), SUM(amount) * 1.1 AS adjusted FROM orders"
    ).json()
    assert [c["eligible"] for c in body["columns"]] == [True, False]
    assert [fact["column"] for fact in body["facts"]] == [0]
    assert float(body["rows"][0][1]) == pytest.approx(4400)


def test_a_literal_is_never_a_fact(space, member, invoices):
    body = query(member, invoices, "SELECT 4000 AS total").json()
    assert body["columns"][0]["eligible"] is False
    assert body["facts"] == []


def test_a_filtered_cell_is_a_fact_with_its_column_lineage(space, member, invoices):
    body = query(member, invoices, "SELECT amount FROM orders WHERE amount > 2000").json()
    assert body["rows"] == [[2750]]
    [fact] = body["facts"]
    assert (fact["label"], fact["lineage"], fact["value"]) == (
        "orders.amount WHERE orders.amount > 2000",
        ["orders.amount", "WHERE orders.amount > 2000"],
        2750,
    )


def test_an_aggregate_over_no_rows_is_not_a_fact(space, member, invoices):
    sql = "SELECT SUM(amount), COUNT(*) FROM orders WHERE invoice = 'none'"
    body = query(member, invoices, sql).json()
    assert body["rows"] == [[None, 0]]
    [fact] = body["facts"]  # NULL proves nothing; a count of zero is a real count
    assert (fact["label"], fact["value"]) == ("COUNT(*) WHERE orders.invoice = 'none'", 0)


def test_a_second_snapshot_leaves_the_first_unchanged(space, owner, member, invoices):
    first = Dataset.objects.get(pk=invoices).current_snapshot
    file_before = hashlib.sha256((settings.DATASETS_ROOT / first.db_path).read_bytes()).hexdigest()
    before = query(member, invoices, "SELECT SUM(amount) FROM orders").json()

    response = upload(owner, space, b"invoice,amount\nB-1,10\n", dataset=invoices)
    assert response.status_code == 201
    assert [s["version"] for s in response.json()["snapshots"]] == [2, 1]

    now_current = query(member, invoices, "SELECT SUM(amount) FROM orders").json()
    assert now_current["rows"] == [[10]]
    pinned = query(member, invoices, "SELECT SUM(amount) FROM orders", snapshot=1).json()
    assert pinned["rows"] == [[4000]]
    assert pinned["proof"]["result_sha256"] == before["proof"]["result_sha256"]
    first.refresh_from_db()
    assert first.sha256 == hashlib.sha256(INVOICES).hexdigest()
    after = hashlib.sha256((settings.DATASETS_ROOT / first.db_path).read_bytes()).hexdigest()
    assert after == file_before


def test_datasets_are_visible_exactly_when_their_space_is(space, member, outsider, invoices):
    assert [d["id"] for d in client_for(member).get("/v1/datasets").json()["results"]] == [invoices]
    assert client_for(outsider).get("/v1/datasets").json()["results"] == []
    for path in (f"/v1/datasets/{invoices}", f"/v1/datasets/{invoices}/schema"):
        assert_error(client_for(outsider).get(path), 404, "not_found")
    assert_error(query(outsider, invoices, "SELECT SUM(amount) FROM orders"), 404, "not_found")
    assert not GovernedQuery.objects.exists()


def test_a_reader_cannot_upload_and_an_outsider_gets_404(space, member, outsider):
    assert_error(upload(member, space), 403, "permission_denied")
    assert_error(upload(outsider, space), 404, "not_found")
    assert not Dataset.objects.exists()


def test_the_schema_endpoint_is_labelled_unverified(space, member, invoices):
    body = client_for(member).get(f"/v1/datasets/{invoices}/schema").json()
    assert body["label"] == "unverified"
    assert [c["name"] for c in body["tables"]["orders"]] == ["invoice", "amount"]


@pytest.mark.parametrize(
    ("data", "name", "fields", "code", "field"),
    [
        (b"a,b\n1,2\n3,4,5\n", "ragged.csv", {}, "malformed_csv", "file"),
        (b"a,b\n\xff\xfe,1\n", "latin.csv", {}, "bad_encoding", "file"),
        (b"", "empty.csv", {}, "empty_file", "file"),
        (b"a,A\n1,2\n", "dup.csv", {}, "duplicate_columns", "file"),
        (INVOICES, "invoices.csv", {"table": "1bad"}, "invalid_table_name", "table"),
        (INVOICES, "invoices.xlsx", {}, "unsupported_type", "file"),
    ],
)
def test_bad_uploads_are_typed_and_leave_nothing(space, owner, data, name, fields, code, field):
    def snapshot_files() -> list:
        return sorted((settings.DATASETS_ROOT / "datasets").glob("**/*"))

    before = snapshot_files()
    error = assert_error(upload(owner, space, data, name, **fields), 422, code)
    assert field in error["fields"]
    assert not Dataset.objects.exists() and not DatasetSnapshot.objects.exists()
    assert [p for p in snapshot_files() if p.is_file()] == [p for p in before if p.is_file()]


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELECT 1; DROP TABLE orders", "unsupported_sql"),
        ("DROP TABLE orders", "unsupported_sql"),
        ("SELECT * FROM read_csv('/etc/passwd')", "unsupported_sql"),
        ("ATTACH 'other.db'", "unsupported_sql"),
        ("COPY orders TO 'out.csv'", "unsupported_sql"),
        ("INSTALL httpfs", "unsupported_sql"),
        ("PRAGMA version", "unsupported_sql"),
        ("SELECT nope FROM orders", "unknown_column"),
        ("SELECT " + "amount, " * 150_000 + "amount FROM orders", "too_large"),
    ],
)
def test_bad_sql_gets_a_typed_error_and_is_not_recorded(space, member, invoices, sql, code):
    error = assert_error(query(member, invoices, sql), 422, code)
    assert "sql" in error["fields"]
    assert not GovernedQuery.objects.exists()


def test_an_unknown_snapshot_or_dataset_is_404(space, member, invoices):
    assert_error(query(member, invoices, "SELECT 1", snapshot=9), 404, "snapshot_not_found")
    assert_error(query(member, 999999, "SELECT 1"), 404, "not_found")
