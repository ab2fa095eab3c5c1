from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from core.errors import NotFoundError
from core.inputs import object_id_parse, text_is_storable
from core.models import ApiKey
from core.types import User, UserOrAnonymous


def api_keys_of(*, user: User) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user).order_by("-created_at")


def api_key_get_owned(*, user: User, api_key_id: object) -> ApiKey:
    """One of user's own keys; NotFoundError whether it is missing or someone else's."""
    pk = object_id_parse(api_key_id)
    api_key = api_keys_of(user=user).filter(pk=pk).first() if pk else None
    if api_key is None:
        raise NotFoundError("API key not found.")
    return api_key


def user_can_manage_users(*, user: UserOrAnonymous) -> bool:
    """Create, deactivate and reset users: active superusers only (staff create spaces)."""
    return bool(user.is_authenticated and user.is_active and user.is_superuser)


def users_managed_by(*, user: UserOrAnonymous) -> QuerySet[User]:
    """Every user, by name, for one who may manage users; nobody for anyone else."""
    if not user_can_manage_users(user=user):
        return get_user_model().objects.none()
    return get_user_model().objects.order_by("username")


def user_get_managed(*, user: UserOrAnonymous, user_id: object) -> User:
    """A user that `user` manages (see users_managed_by); NotFoundError whether the user is
    missing or `user` manages nobody."""
    pk = object_id_parse(user_id)
    managed = users_managed_by(user=user).filter(pk=pk).first() if pk else None
    if managed is None:
        raise NotFoundError("User not found.")
    return managed


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
