"""State changes of the platform: users and API keys."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import ConflictError, UnprocessableError
from core.fields import concrete_field
from core.inputs import text_is_storable
from core.models import ApiKey
from core.types import User

KEY_PREFIX = "kn_"
VISIBLE_PREFIX_LENGTH = 11  # "kn_" + 8 characters of the secret
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyNotFound(Exception):
    pass


class ApiKeyAmbiguous(Exception):
    pass


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    secret: str  # shown once, never stored


@transaction.atomic
def user_create(
    *,
    username: str,
    email: str = "",
    password: str | None = None,
    staff: bool = False,
    superuser: bool = False,
) -> User:
    """Create an active user. Without a password the user can only use API keys.

    Staff opens Django admin and grants no read of any space (roles do that). Raises
    ConflictError when the name is taken, UnprocessableError for a bad name or password.
    """
    users = get_user_model()
    field = concrete_field(users, users.USERNAME_FIELD)
    try:
        if not text_is_storable(username):
            raise ValidationError("The name holds a character that cannot be stored.")
        field.run_validators(username)
        if not username:
            raise ValidationError("The name is empty.")
    except ValidationError as error:
        message = " ".join(error.messages)
        raise UnprocessableError(
            message, code="invalid_username", fields={"username": message}
        ) from None
    user = users(username=username, email=email, is_staff=staff or superuser)
    user.is_superuser = superuser
    if password is None:
        user.set_unusable_password()
    else:
        try:
            password_validation.validate_password(password, user)
        except ValidationError as error:
            message = " ".join(error.messages)
            raise UnprocessableError(
                message, code="invalid_password", fields={"password": message}
            ) from None
        user.set_password(password)
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:
        raise ConflictError(
            "A user with this name exists.", code="user_exists", fields={"username": "Taken."}
        ) from None
    return user


def password_generate() -> str:
    """A fresh password for a person to type once and change: 16 URL-safe characters."""
    return secrets.token_urlsafe(12)


@transaction.atomic
def user_password_reset(*, user: User) -> str:
    """Give user a new generated password and return it: the only copy in plain text (only
    its hash is stored). Their sessions end (Django checks the password hash on each
    request); their API keys keep working."""
    password = password_generate()
    user.set_password(password)
    user.save(update_fields=["password"])
    return password


@transaction.atomic
def user_active_set(*, user: User, active: bool, acting: User) -> User:
    """Deactivate or reactivate user. A deactivated user can neither sign in nor use an API
    key (both check `is_active`); their roles and keys stay for a reactivation.

    Raises UnprocessableError when acting would deactivate themselves: the last way in of
    the one person who can undo it.
    """
    if not active and user.pk == acting.pk:
        raise UnprocessableError(
            "You cannot deactivate yourself.", code="deactivate_self", fields={"user": "Yourself."}
        )
    if user.is_active != active:
        user.is_active = active
        user.save(update_fields=["is_active"])
    return user


def api_key_hash(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode()).hexdigest()


@transaction.atomic
def api_key_create(*, user: User, name: str = "") -> IssuedApiKey:
    """Issue a new key for user. The returned secret is the only copy of the key."""
    raw = KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        user=user,
        name=name[:100],
        prefix=raw[:VISIBLE_PREFIX_LENGTH],
        key_sha256=api_key_hash(raw),
    )
    return IssuedApiKey(api_key=api_key, secret=raw)


@transaction.atomic
def api_key_revoke(*, prefix: str, user: User | None = None) -> ApiKey:
    """Revoke the one active key whose visible prefix is `prefix`.

    Raises ApiKeyNotFound when none matches and ApiKeyAmbiguous when several do.
    Revoking twice keeps the first revocation time.
    """
    keys = ApiKey.objects.select_for_update().filter(prefix=prefix[:VISIBLE_PREFIX_LENGTH])
    if user is not None:
        keys = keys.filter(user=user)
    matches = list(keys)
    if not matches:
        raise ApiKeyNotFound(prefix)
    if len(matches) > 1:
        raise ApiKeyAmbiguous(prefix)
    return _revoke(matches[0])


@transaction.atomic
def api_key_revoke_one(*, api_key_id: int) -> ApiKey:
    """Revoke one key by id (admin). Revocation is one-way: nothing clears `revoked_at`."""
    return _revoke(ApiKey.objects.select_for_update().get(pk=api_key_id))


def _revoke(api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The active key matching raw_key, with its user, or None.

    Touches last_used_at at most once a minute so that reads stay cheap.
    """
    if not raw_key.startswith(KEY_PREFIX) or len(raw_key) > 200:
        return None
    api_key = (
        ApiKey.objects.select_related("user")
        .filter(key_sha256=api_key_hash(raw_key), revoked_at__isnull=True)
        .first()
    )
    if api_key is None or not api_key.user.is_active:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key
