"""The conversation's explicit selection (answers.ConversationSource, issue 12)."""

import pytest
from django.db import IntegrityError, transaction

from answers.models import Conversation, ConversationSource
from answers.pipeline.lifecycle import run_start
from answers.pipeline.request import answer_request_parse
from answers.selectors import conversation_selection
from answers.services import conversation_sources_set
from knowledge.documents.upload import document_upload
from knowledge.services import space_create

pytestmark = pytest.mark.django_db


def test_only_readable_spaces_and_own_private_files_are_stored(space, staff, member, outsider):
    hidden = space_create(name="Hidden", created_by=staff)
    mine = document_upload(user=member, filename="a.txt", data=b"Mine.", private=True)
    theirs = document_upload(user=outsider, filename="b.txt", data=b"Theirs.", private=True)
    conversation = Conversation.objects.create(user=member)
    stored = conversation_sources_set(
        user=member,
        conversation=conversation,
        space_ids=[space.pk, hidden.pk, 10**15],
        file_ids=[mine.document.pk, theirs.document.pk],
    )
    assert stored == ({space.pk}, {mine.document.pk})
    assert conversation_selection(conversation_id=conversation.pk) == stored


def test_a_new_selection_replaces_the_old_one(space, member):
    mine = document_upload(user=member, filename="a.txt", data=b"Mine.", private=True)
    conversation = Conversation.objects.create(user=member)
    conversation_sources_set(
        user=member, conversation=conversation, space_ids=[space.pk], file_ids=[mine.document.pk]
    )
    conversation_sources_set(
        user=member, conversation=conversation, space_ids=[], file_ids=[mine.document.pk]
    )
    assert conversation_selection(conversation_id=conversation.pk) == (set(), {mine.document.pk})
    assert ConversationSource.objects.filter(conversation=conversation).count() == 1


def test_run_start_stores_the_requests_selection_for_the_conversation(space, member):
    mine = document_upload(user=member, filename="a.txt", data=b"Mine.", private=True)
    request = answer_request_parse(
        {"query": "What?", "space_ids": [space.pk], "selected_sources": [mine.document.pk]}
    )
    run = run_start(user=member, request=request)
    assert conversation_selection(conversation_id=run.conversation_id) == (
        {space.pk},
        {mine.document.pk},
    )
    follow_up = answer_request_parse({"query": "And?", "conversation_id": run.conversation_id})
    run_start(user=member, request=follow_up)
    assert conversation_selection(conversation_id=run.conversation_id) == (set(), set())


def test_a_row_is_either_a_space_or_a_file(space, member):
    mine = document_upload(user=member, filename="a.txt", data=b"Mine.", private=True)
    conversation = Conversation.objects.create(user=member)
    for fields in ({}, {"space": space, "document": mine.document}):
        with pytest.raises(IntegrityError), transaction.atomic():
            ConversationSource.objects.create(conversation=conversation, **fields)
