from django.contrib import admin
from guardian.admin import GuardedModelAdmin

from knowledge.models import Document, DocumentRevision, Extraction, Space


@admin.register(Space)
class SpaceAdmin(GuardedModelAdmin):
    list_display = ["name", "created_by", "created_at"]
    list_select_related = ["created_by"]
    search_fields = ["name"]
    readonly_fields = ["created_by", "created_at"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Revisions, extractions and passages are written by the pipeline only."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ExtractionInline(admin.TabularInline):
    model = Extraction
    fields = ["role", "status", "error_code", "progress", "extractor", "extractor_version"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "kind", "space", "owner", "current_revision", "created_at"]
    list_filter = ["kind", "space"]
    list_select_related = ["space", "owner", "current_revision"]
    search_fields = ["title"]
    readonly_fields = ["space", "owner", "kind", "created_by", "created_at", "current_revision"]


@admin.register(DocumentRevision)
class DocumentRevisionAdmin(ReadOnlyAdmin):
    list_display = ["document", "number", "filename", "size", "uploaded_by", "created_at"]
    list_select_related = ["document", "uploaded_by"]
    search_fields = ["document__title", "sha256"]
    inlines = [ExtractionInline]


@admin.register(Extraction)
class ExtractionAdmin(ReadOnlyAdmin):
    list_display = ["revision", "role", "status", "error_code", "progress", "extractor", "attempts"]
    list_filter = ["status", "role", "error_code"]
    list_select_related = ["revision__document"]
    exclude = ["norm_text"]
