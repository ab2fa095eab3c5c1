"""AccessScope: what one reader may read in one run, read once from the permission rows
and then a value: every statement filters by its ids."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.documents.upload import document_upload
from knowledge.models import Document
from knowledge.scope import access_scope_build
from knowledge.services import space_create, space_member_remove, space_member_set

pytestmark = pytest.mark.django_db


def _permission_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "guardian_" in q["sql"]]


def _private(user, name: str) -> Document:
    data = f"The text of {name}.".encode()
    return document_upload(user=user, filename=name, data=data, private=True).revision.document


def test_a_scope_reads_the_permission_rows_once_and_its_queries_never_again(staff, space, member):
    other = space_create(name="Finance", created_by=staff)
    space_create(name="Hidden", created_by=staff)
    space_member_set(space=other, username=member.username, role="reader")
    access_scope_build(user=member)  # Django's content-type cache, warm as in a process
    with CaptureQueriesContext(connection) as built:
        scope = access_scope_build(user=member)
    assert len(built) == 1 and len(_permission_reads(built)) == 1
    assert scope.space_ids == {space.pk, other.pk} and scope.every_space
    with CaptureQueriesContext(connection) as used:
        list(scope.passages())
        list(scope.documents())
    assert len(used) == 2 and not _permission_reads(used)


def test_chosen_spaces_narrow_the_scope_and_never_widen_it(staff, space, member):
    hidden = space_create(name="Hidden", created_by=staff)
    scope = access_scope_build(user=member, space_ids=[space.pk, hidden.pk, 999_999])
    assert scope.space_ids == {space.pk}
    assert not scope.every_space
    assert access_scope_build(user=member, space_ids=[hidden.pk]).empty


def test_a_role_removed_after_the_build_counts_only_for_a_fresh_scope(space, member):
    scope = access_scope_build(user=member)
    space_member_remove(space=space, username=member.username)
    assert scope.space_ids == {space.pk}  # a value: the run that built it keeps it
    fresh = access_scope_build(user=member)
    assert fresh.empty  # what the publication's recheck builds under its locks
    assert not fresh.passages().exists() and not fresh.documents().exists()


def test_only_the_readers_own_selected_private_files_are_in_scope(space, owner, member):
    mine = _private(member, "mine.txt")
    unselected = _private(member, "other.txt")
    theirs = _private(owner, "theirs.txt")
    with CaptureQueriesContext(connection) as built:
        scope = access_scope_build(user=member, selected_sources=[mine.pk, theirs.pk])
    assert len(built) == 2  # the spaces, then the files
    assert scope.file_ids == {mine.pk}
    documents = set(scope.documents().values_list("pk", flat=True))
    assert mine.pk in documents
    assert unselected.pk not in documents and theirs.pk not in documents
    assert access_scope_build(user=member).file_ids == frozenset()  # none selected


def test_an_inactive_or_anonymous_reader_has_an_empty_scope(space, member):
    from django.contrib.auth.models import AnonymousUser

    mine = _private(member, "mine.txt")
    member.is_active = False
    assert access_scope_build(user=member, selected_sources=[mine.pk]).empty
    anonymous = access_scope_build(user=AnonymousUser())
    assert anonymous.empty and not anonymous.passages().exists()
