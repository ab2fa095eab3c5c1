from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from core.inputs import text_is_storable
from core.models import ApiKey
from core.types import User, UserOrAnonymous


def api_keys_of(*, user: User) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user).order_by("-created_at")


def api_keys_visible_in_admin(*, user: UserOrAnonymous) -> QuerySet[ApiKey]:
    """Superusers see every key; other staff (with the model permission) only their own."""
    if not isinstance(user, User):  # admin never asks for an anonymous request: no keys
        return ApiKey.objects.none()
    if user.is_active and user.is_superuser:
        return ApiKey.objects.all()
    return ApiKey.objects.filter(user_id=user.pk)


def user_get_by_username(*, username: str) -> User | None:
    if not text_is_storable(username):  # no user has such a name; PostgreSQL cannot compare it
        return None
    return get_user_model().objects.filter(username=username, is_active=True).first()
