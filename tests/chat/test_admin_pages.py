"""Administration pages in the chat (issue 51, item 1): users for superusers, new spaces
for staff, members for a space's curators, API keys for everyone. Django's test client
against the views, with the people of every access path: anonymous, a reader, the curator
of another space, staff who curate nothing, the space's curator and a superuser."""

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from core.models import ApiKey
from core.services import api_key_create
from knowledge.models import Space
from knowledge.selectors import space_members
from knowledge.services import space_create, space_member_set
from tests.helpers import make_user

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"data-secret-value>([^<]+)<")


def browser(user=None, **options) -> Client:
    client = Client(**options)
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def people(db) -> dict:
    """The curator (staff) of "Ours" with a reader, the curator (not staff) of "Theirs",
    staff who curate nothing and a superuser."""
    curator = make_user("curator", staff=True)
    ours = space_create(name="Ours", created_by=curator)
    reader = make_user("reader")
    space_member_set(space=ours, username="reader", role="reader")
    stranger = make_user("stranger")
    theirs = space_create(name="Theirs", created_by=make_user("founder", staff=True))
    space_member_set(space=theirs, username="stranger", role="curator")
    superuser = get_user_model().objects.create_superuser("root", password="test-password-1")
    return {
        "ours": ours,
        "theirs": theirs,
        "curator": curator,
        "reader": reader,
        "stranger": stranger,  # curator of another space
        "staff": make_user("staff", staff=True),  # curates nothing
        "superuser": superuser,
    }


def status_of(client: Client, method: str, url: str, data: dict | None = None) -> int:
    response = getattr(client, method)(url, data or {})
    return response.status_code


def test_anonymous_is_sent_to_sign_in_from_every_new_page(people):
    anonymous = Client()
    ours = people["ours"].pk
    for method, url in [
        ("get", "/users/"),
        ("post", "/users/"),
        ("post", f"/users/{people['reader'].pk}/active/"),
        ("post", f"/users/{people['reader'].pk}/password/"),
        ("get", "/spaces/new/"),
        ("post", "/spaces/new/"),
        ("get", f"/spaces/{ours}/members/"),
        ("post", f"/spaces/{ours}/members/"),
        ("post", f"/spaces/{ours}/members/remove/"),
        ("get", "/keys/"),
        ("post", "/keys/"),
        ("post", "/keys/1/revoke/"),
    ]:
        response = getattr(anonymous, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/login/?next="), url


def test_the_users_pages_are_a_404_for_everyone_but_superusers(people):
    target = people["reader"].pk
    pages = [
        ("get", "/users/", None),
        ("post", "/users/", {"username": "someone"}),
        ("post", f"/users/{target}/active/", {"active": "0"}),
        ("post", f"/users/{target}/password/", None),
    ]
    for name in ("reader", "stranger", "staff", "curator"):
        client = browser(people[name])
        for method, url, data in pages:
            assert status_of(client, method, url, data) == 404, (name, url)
    superuser = browser(people["superuser"])
    assert status_of(superuser, "get", "/users/") == 200
    # A made-up user is the same 404 a forbidden one is for others.
    assert status_of(superuser, "post", "/users/999999/password/") == 404
    assert get_user_model().objects.get(pk=target).is_active
    assert not get_user_model().objects.filter(username="someone").exists()


def test_the_new_space_page_is_for_staff_and_superusers(people):
    for name in ("reader", "stranger"):
        client = browser(people[name])
        assert status_of(client, "get", "/spaces/new/") == 404, name
        assert status_of(client, "post", "/spaces/new/", {"name": "Mine"}) == 404, name
    assert not Space.objects.filter(name="Mine").exists()
    for name in ("staff", "curator", "superuser"):
        assert status_of(browser(people[name]), "get", "/spaces/new/") == 200, name


def test_the_members_page_is_a_404_for_all_but_the_space_curators(people):
    ours = people["ours"].pk
    for name in ("reader", "stranger", "staff"):
        client = browser(people[name])
        for method, url, data in [
            ("get", f"/spaces/{ours}/members/", None),
            ("post", f"/spaces/{ours}/members/", {"username": name, "role": "curator"}),
            ("post", f"/spaces/{ours}/members/remove/", {"username": "reader"}),
        ]:
            assert status_of(client, method, url, data) == 404, (name, url)
            missing = url.replace(f"/{ours}/", "/999999/")
            assert status_of(client, method, missing, data) == 404, (name, missing)
    assert space_members(space=people["ours"]) == [
        {"username": "curator", "role": "curator"},
        {"username": "reader", "role": "reader"},
    ]
    for name in ("curator", "superuser"):
        page = browser(people[name]).get(f"/spaces/{ours}/members/")
        assert page.status_code == 200
        assert 'data-member="reader" data-role="reader"' in page.content.decode()


def test_every_signed_in_person_has_a_keys_page_with_only_their_own_keys(people):
    theirs = api_key_create(user=people["stranger"], name="stranger-laptop")
    mine = api_key_create(user=people["reader"], name="reader-laptop")
    for name in ("reader", "stranger", "staff", "curator", "superuser"):
        page = browser(people[name]).get("/keys/")
        assert page.status_code == 200, name
    text = browser(people["reader"]).get("/keys/").content.decode()
    assert "reader-laptop" in text and mine.api_key.prefix in text
    assert "stranger-laptop" not in text and theirs.api_key.prefix not in text
    # Someone else's key is the same 404 as a made-up one, and stays active.
    reader = browser(people["reader"])
    assert status_of(reader, "post", f"/keys/{theirs.api_key.pk}/revoke/") == 404
    assert status_of(reader, "post", "/keys/999999/revoke/") == 404
    assert ApiKey.objects.get(pk=theirs.api_key.pk).revoked_at is None


def test_the_navigation_links_each_person_to_their_pages(people):
    reader = browser(people["reader"]).get("/spaces/").content.decode()
    assert 'href="/keys/"' in reader
    assert 'href="/users/"' not in reader and 'href="/spaces/new/"' not in reader
    staff = browser(people["staff"]).get("/spaces/").content.decode()
    assert 'href="/spaces/new/"' in staff and 'href="/users/"' not in staff
    superuser = browser(people["superuser"]).get("/spaces/").content.decode()
    assert 'href="/users/"' in superuser and 'href="/spaces/new/"' in superuser
    ours = people["ours"].pk
    members_link = f'href="/spaces/{ours}/members/"'
    assert members_link in browser(people["curator"]).get(f"/spaces/{ours}/").content.decode()
    assert members_link not in browser(people["reader"]).get(f"/spaces/{ours}/").content.decode()


# --- API keys: shown once, revoked at once ----------------------------------------------


def test_it_shows_a_new_key_once_and_a_revoked_key_fails_at_once(people):
    client = browser(people["reader"])
    created = client.post("/keys/", {"name": "laptop"})
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    secret = SECRET.search(created.content.decode()).group(1)
    api_key = ApiKey.objects.get(user=people["reader"], name="laptop")
    assert secret.startswith(api_key.prefix) and api_key.key_sha256 != secret
    listing = client.get("/keys/").content.decode()
    assert secret not in listing and "data-secret" not in listing
    assert api_key.prefix in listing  # the visible prefix only

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    spaces = api.get("/v1/spaces")
    assert spaces.status_code == 200
    assert [row["name"] for row in spaces.json()["results"]] == ["Ours"]
    assert 'data-state="active"' in client.get("/keys/").content.decode()

    revoked = client.post(f"/keys/{api_key.pk}/revoke/")
    assert revoked.status_code == 302 and revoked["Location"] == "/keys/"
    assert api.get("/v1/spaces").status_code == 401
    listing = client.get("/keys/").content.decode()
    assert f'data-key="{api_key.prefix}" data-state="revoked"' in listing
    assert secret not in listing


def test_it_refuses_a_key_without_a_name(people):
    response = browser(people["reader"]).post("/keys/", {"name": "  "})
    assert response.status_code == 422
    assert "This field is required." in response.content.decode()
    assert not ApiKey.objects.filter(user=people["reader"]).exists()


def test_a_post_without_its_csrf_token_is_refused(people):
    client = browser(people["reader"], enforce_csrf_checks=True)
    assert client.post("/keys/", {"name": "laptop"}).status_code == 403
    assert not ApiKey.objects.filter(user=people["reader"]).exists()


# --- users (superusers) ------------------------------------------------------------------


def test_a_superuser_creates_a_user_whose_password_is_shown_once_and_never_logged(people, caplog):
    client = browser(people["superuser"])
    with caplog.at_level(logging.DEBUG):
        response = client.post("/users/", {"username": "newcomer", "staff": "on"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    password = SECRET.search(response.content.decode()).group(1)
    assert password not in caplog.text
    newcomer = get_user_model().objects.get(username="newcomer")
    assert newcomer.is_staff and not newcomer.is_superuser and newcomer.is_active
    assert password not in newcomer.password and newcomer.check_password(password)
    assert password not in client.get("/users/").content.decode()
    assert Client().login(username="newcomer", password=password)


def test_a_superuser_resets_a_password_shown_once(people):
    client = browser(people["superuser"])
    response = client.post(f"/users/{people['reader'].pk}/password/")
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    password = SECRET.search(response.content.decode()).group(1)
    assert not Client().login(username="reader", password="test-password-1")
    assert Client().login(username="reader", password=password)
    assert password not in client.get("/users/").content.decode()


def test_a_deactivated_user_can_neither_sign_in_nor_use_a_key_until_reactivated(people):
    client = browser(people["superuser"])
    reader = people["reader"]
    secret = api_key_create(user=reader).secret
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    signed_in = browser(reader)

    assert client.post(f"/users/{reader.pk}/active/", {"active": "0"}).status_code == 302
    assert not Client().login(username="reader", password="test-password-1")
    assert api.get("/v1/spaces").status_code == 401
    assert signed_in.get("/keys/").status_code == 302  # the open session ends too
    assert "data-reactivate" in client.get("/users/").content.decode()

    assert client.post(f"/users/{reader.pk}/active/", {"active": "1"}).status_code == 302
    assert api.get("/v1/spaces").status_code == 200
    assert Client().login(username="reader", password="test-password-1")


def test_a_superuser_cannot_deactivate_themselves(people):
    superuser = people["superuser"]
    client = browser(superuser)
    response = client.post(f"/users/{superuser.pk}/active/", {"active": "0"}, follow=True)
    assert "You cannot deactivate yourself." in response.content.decode()
    superuser.refresh_from_db()
    assert superuser.is_active


@pytest.mark.parametrize(
    ("username", "message"),
    [
        ("", "This field is required."),
        ("reader", "A user with this name exists."),
        ("no spaces allowed", "Enter a valid username."),
    ],
)
def test_it_refuses_a_bad_new_user_with_a_form_error(people, username, message):
    response = browser(people["superuser"]).post("/users/", {"username": username})
    assert response.status_code == 422
    assert message in response.content.decode()
    assert "data-secret" not in response.content.decode()
    assert get_user_model().objects.filter(username=username).count() == (
        1 if username == "reader" else 0
    )


# --- spaces and members -----------------------------------------------------------------


def test_staff_create_a_space_they_curate(people):
    response = browser(people["staff"]).post(
        "/spaces/new/", {"name": "Harbour", "description": "Cranes and docks"}
    )
    space = Space.objects.get(name="Harbour")
    assert response.status_code == 302 and response["Location"] == f"/spaces/{space.pk}/members/"
    assert space.created_by == people["staff"]
    assert space_members(space=space) == [{"username": "staff", "role": "curator"}]


@pytest.mark.parametrize(
    ("name", "message"),
    [("", "This field is required."), ("Ours", "A space with this name already exists.")],
)
def test_it_refuses_a_bad_new_space_with_a_form_error(people, name, message):
    response = browser(people["staff"]).post("/spaces/new/", {"name": name})
    assert response.status_code == 422
    assert message in response.content.decode()
    assert Space.objects.count() == 2


def test_a_curator_gives_and_takes_roles_by_username(people):
    ours = people["ours"]
    make_user("newcomer")
    client = browser(people["curator"])
    url = f"/spaces/{ours.pk}/members/"
    assert client.post(url, {"username": "newcomer", "role": "curator"}).status_code == 302
    assert client.post(url, {"username": "stranger", "role": "reader"}).status_code == 302
    page = client.get(url).content.decode()
    assert 'data-member="newcomer" data-role="curator"' in page
    assert 'data-member="stranger" data-role="reader"' in page
    # The same person again: their role changes, they are not listed twice.
    assert client.post(url, {"username": "newcomer", "role": "reader"}).status_code == 302
    removed = client.post(f"{url}remove/", {"username": "stranger"})
    assert removed.status_code == 302 and removed["Location"] == url
    assert space_members(space=ours) == [
        {"username": "curator", "role": "curator"},
        {"username": "newcomer", "role": "reader"},
        {"username": "reader", "role": "reader"},
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"username": "nobody", "role": "reader"}, "No active user by this name."),
        ({"username": "", "role": "reader"}, "This field is required."),
        ({"username": "stranger", "role": "owner"}, "Select a valid choice."),
        ({"username": "\x00", "role": "reader"}, "Null characters are not allowed."),
    ],
)
def test_it_refuses_a_bad_member_with_a_form_error(people, data, message):
    url = f"/spaces/{people['ours'].pk}/members/"
    response = browser(people["curator"]).post(url, data)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert len(space_members(space=people["ours"])) == 2


def test_removing_someone_without_a_role_is_a_message_not_an_error(people):
    url = f"/spaces/{people['ours'].pk}/members/"
    response = browser(people["curator"]).post(
        f"{url}remove/", {"username": "stranger"}, follow=True
    )
    assert response.status_code == 200
    assert "This person has no role in this space." in response.content.decode()


# --- Django admin ---------------------------------------------------------------------


def test_a_superuser_adds_a_space_in_admin_and_curates_it(people):
    client = browser(people["superuser"])
    response = client.post("/admin/knowledge/space/add/", {"name": "Archive", "description": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    space = Space.objects.get(name="Archive")
    assert space.created_by == people["superuser"]
    assert space_members(space=space) == [{"username": "root", "role": "curator"}]
    duplicate = client.post("/admin/knowledge/space/add/", {"name": "Archive"})
    assert duplicate.status_code == 200 and Space.objects.filter(name="Archive").count() == 1
    assert browser(people["curator"]).get("/admin/knowledge/space/add/").status_code == 403


def test_the_list_pages_cost_the_same_queries_for_one_row_or_many(people):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries(client: Client, url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    reader, superuser = browser(people["reader"]), browser(people["superuser"])
    members = f"/spaces/{people['ours'].pk}/members/"
    api_key_create(user=people["reader"], name="first")
    before = {url: queries(superuser, url) for url in ("/users/", members)}
    keys_before = queries(reader, "/keys/")
    for number in range(5):
        make_user(f"extra-{number}")
        space_member_set(space=people["ours"], username=f"extra-{number}", role="reader")
        api_key_create(user=people["reader"], name=f"key-{number}")
        space_create(name=f"Extra {number}", created_by=people["staff"])
    assert {url: queries(superuser, url) for url in ("/users/", members)} == before
    assert queries(reader, "/keys/") == keys_before
