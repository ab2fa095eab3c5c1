from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from datasets.models import Dataset, DatasetSnapshot, GovernedQuery
from knowledge.admin import CuratedAdmin, SuperuserOnlyAdmin
from knowledge.selectors import spaces_curated_by


@admin.register(Dataset)
class DatasetAdmin(CuratedAdmin):
    list_display = ["name", "space", "current_snapshot", "created_by", "created_at"]
    list_filter = [("space", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["space", "current_snapshot", "created_by"]
    search_fields = ["name"]
    readonly_fields = ["space", "current_snapshot", "created_by", "created_at"]

    def curated(self, request: HttpRequest) -> QuerySet[Dataset]:
        curated = spaces_curated_by(user=request.user)
        return Dataset.objects.filter(space__in=curated.values("pk"))


@admin.register(DatasetSnapshot)
class DatasetSnapshotAdmin(CuratedAdmin):
    list_display = ["dataset", "version", "table_name", "row_count", "sha256", "created_at"]
    list_select_related = ["dataset"]

    def curated(self, request: HttpRequest) -> QuerySet[DatasetSnapshot]:
        curated = spaces_curated_by(user=request.user)
        return DatasetSnapshot.objects.filter(dataset__space__in=curated.values("pk"))


@admin.register(GovernedQuery)
class GovernedQueryAdmin(SuperuserOnlyAdmin):
    """Queries hold what each user asked and got back: superusers only."""

    list_display = ["id", "snapshot", "user", "row_count", "duration_ms", "executed_at"]
    list_select_related = ["snapshot__dataset", "user"]
    search_fields = ["normalised_sql"]
