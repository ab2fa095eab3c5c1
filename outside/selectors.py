"""Which outside channels a person may use, and which a curator may enable."""

from django.db.models import QuerySet

from core.types import UserOrAnonymous
from knowledge.models import Space
from knowledge.selectors import spaces_curated_by, spaces_visible_to
from outside.models import Channel, SpaceChannel


def channels_all() -> QuerySet[Channel]:
    """Every configured channel (superusers' admin)."""
    return Channel.objects.all()


def channels_enablable() -> QuerySet[Channel]:
    """The channels a curator may enable for a space: the active ones."""
    return Channel.objects.filter(active=True)


def channels_usable_by(
    *, user: UserOrAnonymous, space_ids: list[int] | None = None
) -> QuerySet[Channel]:
    """The active channels enabled for a space `user` may read now (of `space_ids` when
    given): the only channels an answer run of theirs may call."""
    spaces = spaces_visible_to(user=user)
    if space_ids is not None:
        spaces = spaces.filter(pk__in=space_ids)
    return Channel.objects.filter(active=True, space_links__space__in=spaces).distinct()


def channel_enabled_for(*, channel_id: int, space_ids: list[int]) -> bool:
    """Whether the channel is still active and enabled for one of the spaces: the recheck
    at sealing asks this of every snapshot's channel."""
    return SpaceChannel.objects.filter(
        channel_id=channel_id, channel__active=True, space_id__in=space_ids
    ).exists()


def space_channels_curated_by(*, user: UserOrAnonymous) -> QuerySet[SpaceChannel]:
    """The channel links of the spaces `user` curates (curators' admin)."""
    return SpaceChannel.objects.filter(space__in=spaces_curated_by(user=user)).select_related(
        "space", "channel"
    )


def space_channels_of(*, space: Space) -> QuerySet[SpaceChannel]:
    return SpaceChannel.objects.filter(space=space).select_related("channel")
