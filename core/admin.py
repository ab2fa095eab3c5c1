from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.models import ApiKey
from core.selectors import api_keys_visible_in_admin
from core.services import api_key_revoke_one


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    """Revocation is one-way: `revoked_at` is read-only and set only by the revoke action."""

    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    list_select_related = ["user"]
    search_fields = ["prefix", "user__username", "name"]
    fields = ["user", "name", "prefix", "key_sha256", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "prefix", "key_sha256", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiKey]:
        return api_keys_visible_in_admin(user=request.user).select_related("user")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Keys are issued by `manage.py apikey create`, which shows the secret once.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False  # a revoked key stays, so its runs still name their credential

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            api_key_revoke_one(api_key_id=api_key.pk)
        self.message_user(request, f"Revoked {len(queryset)} key(s).", messages.SUCCESS)
