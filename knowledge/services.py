"""State changes of knowledge objects."""

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _
from guardian.shortcuts import assign_perm, remove_perm

from core.errors import ConflictError, NotFoundError, UnprocessableError, writing
from core.selectors import user_get_by_username
from core.types import User
from knowledge.models import Space
from knowledge.selectors import ROLE_CURATOR, ROLE_READER

ROLES = (ROLE_READER, ROLE_CURATOR)


def space_create(*, name: str, description: str = "", created_by: User) -> Space:
    """Create a space; its creator becomes its first curator.

    Raises ConflictError when the name is taken.
    """
    action = _("creating the space “%(name)s”") % {"name": name}
    with writing(action), transaction.atomic():
        return _space_create(name=name, description=description, created_by=created_by)


def _space_create(*, name: str, description: str, created_by: User) -> Space:
    try:
        with transaction.atomic():
            space = Space.objects.create(name=name, description=description, created_by=created_by)
    except IntegrityError:
        raise ConflictError(
            "A space with this name already exists.",
            code="space_exists",
            fields={"name": "Already taken."},
        ) from None
    space_member_set(space=space, username=created_by.get_username(), role=ROLE_CURATOR)
    return space


def space_member_set(*, space: Space, username: str, role: str) -> User:
    """Give username exactly `role` in space (reader, or curator which implies reader)."""
    with (
        writing(
            _("making %(username)s a %(role)s of “%(name)s”")
            % {"username": username, "role": role, "name": space.name}
        ),
        transaction.atomic(),
    ):
        return _member_set(space=space, username=username, role=role)


def _member_set(*, space: Space, username: str, role: str) -> User:
    if role not in ROLES:
        raise UnprocessableError(
            "Unknown role.", code="invalid_role", fields={"role": "Must be 'reader' or 'curator'."}
        )
    user = user_get_by_username(username=username)
    if user is None:
        raise UnprocessableError(
            "Unknown user.",
            code="unknown_user",
            fields={"username": "No active user by this name."},
        )
    assign_perm("knowledge.view_space", user, space)
    if role == ROLE_CURATOR:
        assign_perm("knowledge.curate_space", user, space)
    else:
        remove_perm("knowledge.curate_space", user, space)
    return user


def space_member_remove(*, space: Space, username: str) -> None:
    """Take every role in space away from username. NotFoundError when not a member."""
    with (
        writing(
            _("removing %(username)s from “%(name)s”") % {"username": username, "name": space.name}
        ),
        transaction.atomic(),
    ):
        _member_remove(space=space, username=username)


def _member_remove(*, space: Space, username: str) -> None:
    user = user_get_by_username(username=username)
    if user is None or not (
        user.has_perm("knowledge.view_space", space)
        or user.has_perm("knowledge.curate_space", space)
    ):
        raise NotFoundError("Member not found.", code="member_not_found")
    remove_perm("knowledge.curate_space", user, space)
    remove_perm("knowledge.view_space", user, space)
