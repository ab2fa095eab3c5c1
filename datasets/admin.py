from django.contrib import admin

from datasets.models import Dataset, DatasetSnapshot, GovernedQuery
from knowledge.admin import ReadOnlyAdmin


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "space", "current_snapshot", "created_by", "created_at"]
    list_filter = ["space"]
    list_select_related = ["space", "current_snapshot", "created_by"]
    search_fields = ["name"]
    readonly_fields = ["space", "current_snapshot", "created_by", "created_at"]


@admin.register(DatasetSnapshot)
class DatasetSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["dataset", "version", "table_name", "row_count", "sha256", "created_at"]
    list_select_related = ["dataset"]


@admin.register(GovernedQuery)
class GovernedQueryAdmin(ReadOnlyAdmin):
    list_display = ["id", "snapshot", "user", "row_count", "duration_ms", "executed_at"]
    list_select_related = ["snapshot__dataset", "user"]
    search_fields = ["normalised_sql"]
