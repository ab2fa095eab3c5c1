from django.contrib import admin
from django.http import HttpRequest

from knowledge.selectors import spaces_curated_by
from memory.models import MemoryEntry
from memory.services import memory_revoke


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    """Curators see and revoke the project memory of their spaces; personal memory is
    its owner's alone and is not shown here."""

    list_display = ["text", "kind", "space", "user", "created_at", "revoked_at"]
    list_filter = ["kind", ("space", admin.RelatedOnlyFieldListFilter)]
    fields = [
        "text",
        "kind",
        "scope",
        "space",
        "user",
        "origin",
        "sources",
        "created_at",
        "revoked_at",
        "revoked_by",
    ]
    readonly_fields = fields
    actions = ["revoke_selected"]

    def get_queryset(self, request: HttpRequest):
        curated = spaces_curated_by(user=request.user).values("pk")
        return super().get_queryset(request).filter(scope="project", space__in=curated)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.action(description="Revoke the selected entries")
    def revoke_selected(self, request: HttpRequest, queryset) -> None:
        for entry in queryset:  # the queryset is already scoped to curated spaces
            memory_revoke(user=request.user, entry=entry)
        self.message_user(request, f"Revoked {queryset.count()} entries.")
