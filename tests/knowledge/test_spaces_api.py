import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from knowledge.models import Space
from knowledge.services import space_create, space_member_set
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db


def test_staff_creates_a_space_and_becomes_its_curator(staff):
    response = client_for(staff).post(
        "/v1/spaces", {"name": "Finance", "description": "Books"}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Finance" and isinstance(body["id"], int)
    assert staff.has_perm("knowledge.curate_space", Space.objects.get(pk=body["id"]))


def test_it_refuses_space_creation_by_non_staff(owner):
    response = client_for(owner).post("/v1/spaces", {"name": "Mine"}, format="json")
    assert_error(response, 403, "permission_denied")
    assert not Space.objects.filter(name="Mine").exists()


def test_it_rejects_a_duplicate_space_name(staff, space):
    response = client_for(staff).post("/v1/spaces", {"name": "Operations"}, format="json")
    error = assert_error(response, 409, "space_exists")
    assert "name" in error["fields"]


def test_it_names_the_missing_field(staff):
    error = assert_error(client_for(staff).post("/v1/spaces", {}, format="json"), 422, "invalid")
    assert set(error["fields"]) == {"name"}


def test_it_rejects_malformed_json(staff):
    response = client_for(staff).post(
        "/v1/spaces", data="{not json", content_type="application/json"
    )
    assert_error(response, 400, "parse_error")


def test_the_list_shows_only_visible_spaces(space, owner, member, outsider, staff):
    Space.objects.create(name="Hidden")
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    for user, expected in [
        (owner, ["Operations"]),
        (member, ["Operations"]),
        (outsider, []),
        (staff, ["Operations"]),  # as the creator, a curator of it; staff alone reads nothing
        (root, ["Hidden", "Operations"]),
    ]:
        body = client_for(user).get("/v1/spaces").json()
        assert sorted(row["name"] for row in body["results"]) == expected, user
        assert "next" in body


def test_the_list_pages_with_a_next_link(staff):
    for number in range(5):
        space_create(name=f"S{number}", created_by=staff)
    client = client_for(staff)
    first = client.get("/v1/spaces?page_size=2").json()
    assert len(first["results"]) == 2 and first["next"]
    names = [row["name"] for row in first["results"]]
    url = first["next"]
    while url:
        page = client.get(url).json()
        names += [row["name"] for row in page["results"]]
        url = page["next"]
    assert sorted(names) == [f"S{number}" for number in range(5)]


def test_the_list_uses_a_fixed_number_of_queries(owner, django_assert_max_num_queries):
    staff_user = make_user("boss", staff=True)
    for number in range(10):
        space = space_create(name=f"Space {number}", created_by=staff_user)
        space_member_set(space=space, username="owner", role="reader")
    client = client_for(owner)
    with django_assert_max_num_queries(8):
        assert len(client.get("/v1/spaces").json()["results"]) == 10


def test_a_member_sees_the_space_with_its_role(space, owner, member):
    assert client_for(member).get(f"/v1/spaces/{space.pk}").json()["role"] == "reader"
    assert client_for(owner).get(f"/v1/spaces/{space.pk}").json()["role"] == "curator"


def test_a_hidden_space_looks_exactly_like_a_missing_one(space, outsider):
    client = client_for(outsider)
    hidden = client.get(f"/v1/spaces/{space.pk}")
    missing = client.get("/v1/spaces/999999")
    garbage = client.get("/v1/spaces/not-a-number")
    assert hidden.status_code == missing.status_code == garbage.status_code == 404
    assert hidden.json() == missing.json() == garbage.json()


def test_a_curator_adds_a_reader_who_then_sees_the_space(space, owner, outsider):
    response = client_for(owner).post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "reader"}, format="json"
    )
    assert response.status_code == 201
    assert response.json() == {"username": "outsider", "role": "reader"}
    assert client_for(outsider).get(f"/v1/spaces/{space.pk}").status_code == 200
    members = client_for(owner).get(f"/v1/spaces/{space.pk}/members").json()["results"]
    assert {"username": "outsider", "role": "reader"} in members


def test_a_reader_cannot_add_members(space, member, outsider):
    response = client_for(member).post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "reader"}, format="json"
    )
    assert_error(response, 403, "permission_denied")
    assert not outsider.has_perm("knowledge.view_space", space)


def test_a_non_member_gets_404_from_the_members_endpoint(space, outsider):
    response = client_for(outsider).post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "curator"}, format="json"
    )
    assert_error(response, 404, "not_found")
    assert not outsider.has_perm("knowledge.curate_space", space)


def test_staff_without_a_role_neither_read_nor_manage_a_space(space, outsider):
    other_staff = make_user("other-staff", staff=True)
    client = client_for(other_staff)
    assert_error(client.get(f"/v1/spaces/{space.pk}"), 404, "not_found")
    assert_error(client.get(f"/v1/spaces/{space.pk}/members"), 404, "not_found")
    response = client.post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "curator"}, format="json"
    )
    assert_error(response, 404, "not_found")
    assert not outsider.has_perm("knowledge.view_space", space)


def test_a_superuser_manages_members_of_any_space(space, outsider):
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    response = client_for(root).post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "curator"}, format="json"
    )
    assert response.status_code == 201
    assert outsider.has_perm("knowledge.curate_space", space)
    assert outsider.has_perm("knowledge.view_space", space)


def test_it_names_the_field_for_an_unknown_user(space, owner):
    response = client_for(owner).post(
        f"/v1/spaces/{space.pk}/members", {"username": "ghost", "role": "reader"}, format="json"
    )
    error = assert_error(response, 422, "unknown_user")
    assert set(error["fields"]) == {"username"}


def test_it_names_the_field_for_a_bad_role(space, owner):
    response = client_for(owner).post(
        f"/v1/spaces/{space.pk}/members", {"username": "outsider", "role": "admin"}, format="json"
    )
    error = assert_error(response, 422, "invalid")
    assert set(error["fields"]) == {"role"}


def test_changing_a_curator_to_reader_takes_curation_away(space, owner, member):
    client_for(owner).post(
        f"/v1/spaces/{space.pk}/members", {"username": "owner", "role": "reader"}, format="json"
    )
    assert not owner.has_perm("knowledge.curate_space", space)
    assert owner.has_perm("knowledge.view_space", space)


def test_removing_a_member_hides_the_space_from_them(space, owner, member):
    response = client_for(owner).delete(f"/v1/spaces/{space.pk}/members/member")
    assert response.status_code == 204
    assert client_for(member).get(f"/v1/spaces/{space.pk}").status_code == 404
    again = client_for(owner).delete(f"/v1/spaces/{space.pk}/members/member")
    assert_error(again, 404, "member_not_found")


def test_a_reader_cannot_remove_members(space, owner, member):
    response = client_for(member).delete(f"/v1/spaces/{space.pk}/members/owner")
    assert_error(response, 403, "permission_denied")
    assert owner.has_perm("knowledge.curate_space", space)


def test_session_auth_works_for_browser_clients(space, member):
    client = APIClient()
    client.force_login(member)
    assert client.get(f"/v1/spaces/{space.pk}").status_code == 200
