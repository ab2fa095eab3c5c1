"""Which outside channels a person may use, and which a curator may enable."""

from django.db import connection
from django.db.models import QuerySet

from core.types import UserOrAnonymous
from knowledge.models import Space
from knowledge.selectors import spaces_curated_by, spaces_visible_to
from outside.models import Channel, Snapshot, SpaceChannel


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


def snapshots_still_usable(
    *, user_id: int, quoted: list[tuple[int, int, int]], space_ids: frozenset[int]
) -> set[int]:
    """Of the quoted snapshots (snapshot id, document id, revision id), the document ids
    whose snapshot is still the asker's own, with the same document and revision, and whose
    channel is still active and enabled for one of `space_ids` (the scope the publication's
    recheck built after its locks). The channel rows and their space links are read FOR
    SHARE: disabling a channel that started first is waited for and seen, one that starts
    later waits until the publication commits."""
    if not quoted or not space_ids:
        return set()
    snapshots = {
        pk: (document, revision, channel)
        for pk, document, revision, channel in Snapshot.objects.filter(
            pk__in=[snapshot for snapshot, _, _ in quoted], owner_id=user_id
        ).values_list("pk", "document_id", "revision_id", "channel_id")
    }
    channels = sorted({channel for _, _, channel in snapshots.values()})
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT l.channel_id FROM {SpaceChannel._meta.db_table} l "  # noqa: S608
            f"JOIN {Channel._meta.db_table} c ON c.id = l.channel_id "
            "WHERE l.channel_id = ANY(%s) AND l.space_id = ANY(%s) AND c.active "
            "FOR SHARE OF l, c",
            [channels, sorted(space_ids)],
        )
        enabled = {channel for (channel,) in cursor.fetchall()}
    return {
        document
        for snapshot, document, revision in quoted
        if snapshots.get(snapshot, (None, None, None))[:2] == (document, revision)
        and snapshots[snapshot][2] in enabled
    }
