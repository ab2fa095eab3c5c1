from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from core.types import User
from mcp_server.models import ToolCall


def user_active_get(*, user_id: int) -> User | None:
    """The active user with this id (the stdio transport's fixed user), else None."""
    return get_user_model().objects.filter(pk=user_id, is_active=True).first()


def tool_calls_of(*, user: User) -> QuerySet[ToolCall]:
    return ToolCall.objects.filter(user=user).order_by("-created_at", "-id")
