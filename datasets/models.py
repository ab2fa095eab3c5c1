from django.conf import settings
from django.db import models

from knowledge.models import Space


class Dataset(models.Model):
    """A named dataset of a space; its data lives in immutable snapshots."""

    space = models.ForeignKey(Space, on_delete=models.PROTECT, related_name="datasets")
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    current_snapshot = models.ForeignKey(
        "DatasetSnapshot", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["space", "name"], name="dataset_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class DatasetSnapshot(models.Model):
    """Immutable: one uploaded file loaded into its own DuckDB database file."""

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="snapshots")
    version = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    source_format = models.CharField(max_length=16)  # csv | parquet
    filename = models.CharField(max_length=255)
    table_name = models.CharField(max_length=63)
    row_count = models.PositiveBigIntegerField()
    schema = models.JSONField()  # [{"name": …, "type": …}]
    db_path = models.CharField(max_length=500)  # relative to KOINON_DATASETS_DIR (KOINON_DATA_DIR)
    # Text column → its distinct values (low-cardinality columns only), for the planner's
    # restrictions; None until computed (snapshots loaded before it existed).
    dictionary = models.JSONField(null=True, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "version"], name="snapshot_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset} v{self.version}"


class GovernedQuery(models.Model):
    """A recorded execution with its proof, so an answer can cite the exact result."""

    snapshot = models.ForeignKey(DatasetSnapshot, on_delete=models.PROTECT, related_name="queries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    sql = models.TextField()
    normalised_sql = models.TextField()
    columns = (
        models.JSONField()
    )  # [{"name", "label", "lineage", "canonical", "eligible", "reason"}]
    rows = models.JSONField()
    truncated = models.BooleanField(default=False)
    engine = models.CharField(max_length=32)
    engine_version = models.CharField(max_length=32)
    snapshot_sha256 = models.CharField(max_length=64)
    result_sha256 = models.CharField(max_length=64)
    row_count = models.PositiveIntegerField()
    duration_ms = models.FloatField()
    executed_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "governed queries"

    def __str__(self) -> str:
        return f"query {self.pk} on {self.snapshot}"
