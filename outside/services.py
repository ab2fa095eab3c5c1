"""Configuring outside channels: superusers configure, curators enable one for their spaces.
No rule here grants access to a document: a channel only adds a place to search (SPEC §5)."""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from core.errors import ConflictError, NotFoundError, UnprocessableError, writing
from core.types import User
from knowledge.models import Space
from knowledge.selectors import space_can_curate
from outside.credentials import credential_seal
from outside.models import Channel, SpaceChannel

CREDENTIAL_MAX = 4096


def _refuse_unless_superuser(user: User) -> None:
    if not (user.is_active and user.is_superuser):
        raise NotFoundError("Channel not found.", code="channel_not_found")


def channel_save(*, user: User, channel: Channel, credential: str | None = None) -> Channel:
    """Validate and store a channel a superuser configured. `credential`: None keeps the
    stored one, "" removes it, any other text replaces it (encrypted before it is stored).
    Raises UnprocessableError naming the fields that are wrong, ConflictError for a name
    already taken."""
    _refuse_unless_superuser(user)
    if credential is not None and len(credential) > CREDENTIAL_MAX:
        raise UnprocessableError(
            "The credential is too long.",
            code="invalid_channel",
            fields={"credential": f"At most {CREDENTIAL_MAX} characters."},
        )
    try:
        channel.full_clean(exclude=["created_by"])
    except ValidationError as error:
        raise UnprocessableError(
            "The channel's configuration is not valid.",
            code="invalid_channel",
            fields={field: " ".join(messages) for field, messages in error.message_dict.items()},
        ) from None
    if credential is not None:
        channel.credential = credential_seal(credential) if credential else None
    if channel.created_by_id is None:
        channel.created_by = user
    with writing(_("saving the channel “%(name)s”") % {"name": channel.name}), transaction.atomic():
        try:
            with transaction.atomic():
                channel.save()
        except IntegrityError:
            raise ConflictError(
                "A channel with this name already exists.",
                code="channel_exists",
                fields={"name": "Already taken."},
            ) from None
    return channel


def space_channel_enable(*, user: User, space: Space, channel: Channel) -> SpaceChannel:
    """A curator of `space` lets its readers use `channel`. A space the user does not
    curate and a channel that is not active look alike: not found."""
    if not space_can_curate(user=user, space=space):
        raise NotFoundError("Space not found.", code="space_not_found")
    if not channel.active:
        raise NotFoundError("Channel not found.", code="channel_not_found")
    with (
        writing(
            _("enabling “%(channel)s” in “%(space)s”")
            % {"channel": channel.name, "space": space.name}
        ),
        transaction.atomic(),
    ):
        link, _created = SpaceChannel.objects.get_or_create(
            space=space, channel=channel, defaults={"enabled_by": user}
        )
    return link


def space_channel_disable(*, user: User, space: Space, channel: Channel) -> None:
    """A curator of `space` takes `channel` away from it. An answer gathered from it and not
    yet sealed is then refused at sealing (the recheck)."""
    if not space_can_curate(user=user, space=space):
        raise NotFoundError("Space not found.", code="space_not_found")
    with (
        writing(
            _("disabling “%(channel)s” in “%(space)s”")
            % {"channel": channel.name, "space": space.name}
        ),
        transaction.atomic(),
    ):
        deleted, _by_model = SpaceChannel.objects.filter(space=space, channel=channel).delete()
    if not deleted:
        raise NotFoundError("The channel is not enabled in this space.", code="channel_not_found")
