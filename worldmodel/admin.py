from django.contrib import admin
from django.http import HttpRequest

from worldmodel.models import WorldClaim, WorldStance


class WorldStanceInline(admin.TabularInline):
    """Stances without their quotes: a quote may come from a private file."""

    model = WorldStance
    extra = 0
    can_delete = False
    fields = ("document", "revision", "fact_id", "stance", "quote_length")
    readonly_fields = fields

    @admin.display(description="quote")
    def quote_length(self, obj: WorldStance) -> str:
        return f"‹{len(obj.quote)} characters›"


@admin.register(WorldClaim)
class WorldClaimAdmin(admin.ModelAdmin):
    """Read-only, superusers only, and without text: a world model is personal (as answer
    audits are) and its claims and quotes may come from a private file."""

    list_display = ("id", "user", "run", "created_at")
    list_select_related = ("user", "run")
    fields = ("user", "run", "generation", "text_length", "created_at")
    readonly_fields = fields

    @admin.display(description="claim")
    def text_length(self, obj: WorldClaim) -> str:
        return f"‹{len(obj.text)} characters›"  # derived from quotes, maybe a private file

    inlines = (WorldStanceInline,)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
