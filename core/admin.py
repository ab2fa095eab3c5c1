from django.contrib import admin

from core.models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    list_select_related = ["user"]
    search_fields = ["prefix", "user__username", "name"]
    readonly_fields = ["prefix", "key_sha256", "created_at", "last_used_at", "user"]
    fields = ["user", "name", "prefix", "key_sha256", "created_at", "last_used_at", "revoked_at"]

    def has_add_permission(self, request) -> bool:
        # Keys are issued by `manage.py apikey create`, which shows the secret once.
        return False
