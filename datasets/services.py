"""Dataset snapshots and governed queries (services)."""

import uuid
from dataclasses import asdict
from datetime import datetime
from pathlib import Path, PurePath

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import ConflictError, NotFoundError, PayloadTooLargeError, UnprocessableError
from core.types import User
from datasets.governed import ColumnSchema as GovernedColumn
from datasets.governed import (
    GovernedSqlError,
    LoadedSnapshot,
    LoadError,
    execute,
    load_snapshot,
    value_dictionary,
)
from datasets.models import Dataset, DatasetSnapshot, GovernedQuery
from datasets.selectors import datasets_in_scope
from knowledge.models import Space
from knowledge.scope import AccessScope

FORMATS = {".csv": "csv", ".parquet": "parquet"}


def dataset_upload(
    *,
    user: User,
    space: Space,
    filename: str,
    data: bytes,
    table: str,
    dataset: Dataset | None = None,
    name: str = "",
) -> DatasetSnapshot:
    """Load the file into a new immutable snapshot (a DuckDB file of its own).

    Preconditions: user may add data to `space` (and `dataset` belongs to it).
    Earlier snapshots are never touched. A failure leaves no rows and no file; a
    file is only ever referenced by a committed snapshot row.
    """
    if len(data) > settings.KOINON_UPLOAD_MAX_BYTES:
        raise PayloadTooLargeError(
            f"The file is larger than {settings.KOINON_UPLOAD_MAX_BYTES} bytes."
        )
    fmt = FORMATS.get(PurePath(filename).suffix.lower())
    if fmt is None:
        raise UnprocessableError(
            "Upload a CSV or Parquet file.",
            code="unsupported_type",
            fields={"file": "Only .csv and .parquet are accepted."},
        )
    with transaction.atomic():
        if dataset is None:
            dataset = _dataset_create(space=space, user=user, name=name or PurePath(filename).stem)
        dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
        latest = dataset.snapshots.order_by("-version").values_list("version", flat=True).first()
        version = (latest or 0) + 1
        # A random part: ids restart after a database restore, files must never collide.
        relative = Path("datasets") / str(dataset.pk) / f"v{version}-{uuid.uuid4().hex}.duckdb"
        path = settings.DATASETS_ROOT / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            loaded = load_snapshot(data=data, fmt=fmt, table=table, path=path)
        except LoadError as error:
            field = "table" if error.code == "invalid_table_name" else "file"
            raise UnprocessableError(
                str(error), code=error.code, fields={field: str(error)}
            ) from None
        try:
            dictionary = _dictionary(loaded)
            with transaction.atomic():
                snapshot = DatasetSnapshot.objects.create(
                    dataset=dataset,
                    version=version,
                    sha256=loaded.sha256,
                    source_format=fmt,
                    filename=PurePath(filename).name[:255],
                    table_name=loaded.table,
                    row_count=loaded.row_count,
                    schema=[{"name": c.name, "type": c.type} for c in loaded.columns],
                    db_path=str(relative),
                    uploaded_by=user,
                    dictionary=dictionary,
                )
                dataset.current_snapshot = snapshot
                dataset.save(update_fields=["current_snapshot"])
        except Exception:
            path.unlink(missing_ok=True)
            raise
    return snapshot


def _dataset_create(*, space: Space, user: User, name: str) -> Dataset:
    try:
        with transaction.atomic():
            return Dataset.objects.create(space=space, name=name.strip()[:200], created_by=user)
    except IntegrityError:
        raise ConflictError(
            "A dataset with this name exists; pass `dataset` to add a snapshot to it.",
            code="dataset_exists",
            fields={"name": "Already taken."},
        ) from None


def snapshot_loaded(snapshot: DatasetSnapshot) -> LoadedSnapshot:
    return LoadedSnapshot(
        path=settings.DATASETS_ROOT / snapshot.db_path,
        table=snapshot.table_name,
        row_count=snapshot.row_count,
        columns=[GovernedColumn(c["name"], c["type"]) for c in snapshot.schema],
        sha256=snapshot.sha256,
    )


def _dictionary(loaded: LoadedSnapshot) -> dict[str, list[str]]:
    # The limits of every query on this file: the first connection's configuration stays.
    return value_dictionary(loaded, memory_limit=settings.KOINON_QUERY_MEMORY_LIMIT, threads=1)


def snapshot_dictionary(snapshot: DatasetSnapshot) -> dict[str, list[str]]:
    """The snapshot's value dictionary, computed once for a snapshot loaded before it
    existed (the snapshot's data never changes, so neither does its dictionary)."""
    if snapshot.dictionary is None:
        snapshot.dictionary = _dictionary(snapshot_loaded(snapshot))
        DatasetSnapshot.objects.filter(pk=snapshot.pk).update(dictionary=snapshot.dictionary)
    return snapshot.dictionary


def governed_query_run(*, scope: AccessScope, snapshot: DatasetSnapshot, sql: str) -> GovernedQuery:
    """Execute allow-listed SQL natively on the snapshot and record it with its proof, as
    the scope's reader's.

    Precondition, checked here too: the snapshot's dataset is in the reader's scope
    (NotFoundError otherwise, as for a missing one). Raises UnprocessableError with the
    engine's typed code (`unsupported_sql`, `invalid_sql`, `unknown_column`, `timeout`, …);
    failed queries are not recorded.
    """
    in_scope = datasets_in_scope(scope=scope).filter(pk=snapshot.dataset_id).exists()
    if scope.user_id is None or not in_scope:  # an anonymous scope holds no dataset
        raise NotFoundError("Dataset not found.")
    try:
        result = execute(
            sql,
            snapshot=snapshot_loaded(snapshot),
            timeout_s=settings.KOINON_QUERY_TIMEOUT,
            max_rows=settings.KOINON_QUERY_MAX_ROWS,
            memory_limit=settings.KOINON_QUERY_MEMORY_LIMIT,
            threads=1,
        )
    except GovernedSqlError as error:
        raise UnprocessableError(str(error), code=error.code, fields={"sql": str(error)}) from None
    proof = result.proof
    return GovernedQuery.objects.create(
        snapshot=snapshot,
        user_id=scope.user_id,
        sql=sql,
        normalised_sql=proof.normalised_sql,
        columns=[asdict(column) for column in result.columns],
        rows=result.rows,
        truncated=result.truncated,
        engine=proof.engine,
        engine_version=proof.engine_version,
        snapshot_sha256=proof.snapshot_sha256,
        result_sha256=proof.result_sha256,
        row_count=proof.row_count,
        duration_ms=proof.duration_ms,
        executed_at=datetime.fromisoformat(proof.executed_at),
    )


def governed_query_proof(query: GovernedQuery) -> dict:
    """The recorded execution proof of a governed query, as the API and MCP show it."""
    return {
        "engine": query.engine,
        "engine_version": query.engine_version,
        "snapshot_id": query.snapshot_id,
        "snapshot_sha256": query.snapshot_sha256,
        "normalised_sql": query.normalised_sql,
        "result_sha256": query.result_sha256,
        "row_count": query.row_count,
        "duration_ms": query.duration_ms,
        "executed_at": query.executed_at.isoformat(),
    }


def governed_query_facts(query: GovernedQuery) -> list[dict]:
    """Every eligible cell of a recorded query as a candidate fact.

    Ineligible columns (literals, arithmetic, CASE, casts, other functions) never
    become facts, even beside an eligible column of the same query. Nor does a NULL cell:
    SUM over no rows is NULL, which proves nothing (COUNT over no rows is 0 and stays).
    """
    snapshot = query.snapshot
    facts = []
    for row_index, row in enumerate(query.rows):
        for column_index, column in enumerate(query.columns):
            if not column["eligible"] or row[column_index] is None:
                continue
            facts.append(
                {
                    "kind": "value",
                    "value": row[column_index],
                    "label": column["label"],
                    "lineage": column["lineage"],
                    "row": row_index,
                    "column": column_index,
                    "query_id": query.pk,
                    "snapshot_id": snapshot.pk,
                    "snapshot_version": snapshot.version,
                    "snapshot_sha256": query.snapshot_sha256,
                    "result_sha256": query.result_sha256,
                }
            )
    return facts
