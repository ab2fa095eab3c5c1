from django.contrib import admin
from guardian.admin import GuardedModelAdmin

from knowledge.models import Space


@admin.register(Space)
class SpaceAdmin(GuardedModelAdmin):
    list_display = ["name", "created_by", "created_at"]
    list_select_related = ["created_by"]
    search_fields = ["name"]
    readonly_fields = ["created_by", "created_at"]
