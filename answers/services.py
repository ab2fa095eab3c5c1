"""Conversation state changes (services): the explicit source selection."""

from collections.abc import Iterable

from django.db import transaction

from answers.models import Conversation, ConversationSource
from core.types import User
from knowledge.selectors import private_files_of, spaces_visible_to


@transaction.atomic
def conversation_sources_set(
    *,
    user: User,
    conversation: Conversation,
    space_ids: Iterable[int],
    file_ids: Iterable[int],
) -> tuple[set[int], set[int]]:
    """Replace the conversation's explicit selection; returns what was stored.

    Precondition: `conversation` is the user's (from a scoped selector). Only spaces the
    user may read and the user's own private files are stored; other ids are dropped,
    as selecting a source never grants access to it.
    """
    visible_spaces = spaces_visible_to(user=user).filter(pk__in=set(space_ids))
    spaces = set(visible_spaces.values_list("pk", flat=True))
    files = set(
        private_files_of(user=user).filter(pk__in=set(file_ids)).values_list("pk", flat=True)
    )
    # Lock the conversation: concurrent selections of one conversation apply in turn.
    Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
    stored = ConversationSource.objects.filter(conversation=conversation)
    stored.exclude(space_id__in=spaces).exclude(document_id__in=files).delete()
    present: set[tuple[int | None, int | None]] = set(stored.values_list("space_id", "document_id"))
    new = [
        ConversationSource(conversation=conversation, space_id=pk)
        for pk in sorted(spaces)
        if (pk, None) not in present
    ]
    new += [
        ConversationSource(conversation=conversation, document_id=pk)
        for pk in sorted(files)
        if (None, pk) not in present
    ]
    ConversationSource.objects.bulk_create(new)
    return spaces, files
