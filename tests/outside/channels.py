"""Outside channels as the answer tests configure them: a superuser's, enabled for a space
by its curator."""

from django.contrib.auth import get_user_model

from outside.models import Channel, ChannelKind
from outside.services import channel_save, space_channel_enable


def superuser():
    users = get_user_model().objects
    return users.filter(username="root").first() or users.create_superuser(
        username="root", password="x-1", email=""
    )


def pages_channel(
    *, owner, space, urls: list[str], name: str = "Policy pages", **fields
) -> Channel:
    """A fetch_url channel listing `urls`, enabled for `space` by `owner` (its curator)."""
    channel = channel_save(
        user=superuser(),
        channel=Channel(name=name, kind=ChannelKind.FETCH_URL, options={"urls": urls}, **fields),
    )
    space_channel_enable(user=owner, space=space, channel=channel)
    return channel
