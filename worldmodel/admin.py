from django.contrib import admin

from worldmodel.models import WorldClaim, WorldStance


class WorldStanceInline(admin.TabularInline):
    model = WorldStance
    extra = 0
    can_delete = False
    readonly_fields = ("document", "revision", "fact_id", "stance", "quote")


@admin.register(WorldClaim)
class WorldClaimAdmin(admin.ModelAdmin):
    """Read-only, superusers only: a world model is personal (as answer audits are)."""

    list_display = ("text", "user", "run", "created_at")
    list_select_related = ("user", "run")
    readonly_fields = ("user", "run", "generation", "question", "text", "created_at")
    inlines = (WorldStanceInline,)

    def has_module_permission(self, request: object) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: object, obj: object = None) -> bool:
        return request.user.is_superuser

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: object, obj: object = None) -> bool:
        return False
