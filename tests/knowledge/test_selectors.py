"""spaces_visible_to: built and evaluated afresh every time, nothing kept on the user
object (an answer reads the rows once through `knowledge.scope.AccessScope`)."""

import pytest
from guardian import shortcuts

from knowledge import selectors
from knowledge.selectors import spaces_visible_to
from knowledge.services import space_create, space_member_remove, space_member_set

pytestmark = pytest.mark.django_db


def test_nothing_is_kept_on_the_user_object(monkeypatch, space, member):
    built = []
    real = shortcuts.get_objects_for_user

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(selectors, "get_objects_for_user", counting)
    before = dict(member.__dict__)
    for _ in range(5):
        assert list(spaces_visible_to(user=member)) == [space]
    assert len(built) == 5
    assert member.__dict__.keys() == before.keys()


def test_a_role_granted_or_removed_later_counts_for_the_same_user_object(staff, space, member):
    visible = spaces_visible_to(user=member)
    assert list(visible) == [space]  # evaluated: this clone has a result cache now
    other = space_create(name="Finance", created_by=staff)
    space_member_set(space=other, username=member.username, role="reader")
    assert set(spaces_visible_to(user=member)) == {space, other}
    space_member_remove(space=space, username=member.username)
    assert list(spaces_visible_to(user=member)) == [other]
    assert list(visible) == [space]  # the earlier result is its own, not shared


def test_another_user_object_gets_its_own(space, member, outsider):
    assert list(spaces_visible_to(user=member)) == [space]
    assert list(spaces_visible_to(user=outsider)) == []
    member.is_active = False
    assert list(spaces_visible_to(user=member)) == []  # the checks before it still run
