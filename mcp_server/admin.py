from django.contrib import admin
from django.http import HttpRequest

from mcp_server.models import ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    """Read-only: the audit of MCP tool calls spans all users, so superusers only."""

    list_display = [
        "created_at",
        "user",
        "key_prefix",
        "transport",
        "tool",
        "result_count",
        "error_code",
        "duration_ms",
    ]
    list_filter = ["transport", "tool", "error_code"]
    list_select_related = ["user"]
    search_fields = ["user__username", "key_prefix"]
    readonly_fields = [field.name for field in ToolCall._meta.fields]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
