"""Issue 27 (7): wrong passwords on /login/ and /admin/login/ are throttled per user name
and per address, with a clear message; the right password is not even checked while
throttled; a success clears the name's count."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core import throttle
from core.models import LoginFailure
from tests.helpers import make_user

pytestmark = pytest.mark.django_db

PASSWORD = "test-password-1"  # make_user's


def attempt(client: Client, path: str, username: str, password: str):
    return client.post(path, {"username": username, "password": password})


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_a_name_with_too_many_wrong_passwords_is_refused_even_with_the_right_one(path):
    make_user("root", staff=True)
    client = Client()
    for _ in range(throttle.PER_USERNAME):
        page = attempt(client, path, "root", "wrong")
        assert page.status_code == 200 and "Too many failed" not in page.content.decode()
    refused = attempt(client, path, "ROOT", PASSWORD)  # case-folded: the same name
    assert refused.status_code == 200
    text = refused.content.decode()
    assert "Too many failed sign-ins. Try again in 15 minutes." in text
    assert "_auth_user_id" not in client.session
    # Another name from another address is not affected.
    make_user("other", staff=True)
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert attempt(elsewhere, path, "other", PASSWORD).status_code == 302


def test_the_throttle_ends_when_the_failures_leave_the_window():
    make_user("member")
    client = Client()
    for _ in range(throttle.PER_USERNAME):
        attempt(client, "/login/", "member", "wrong")
    assert "Too many failed" in attempt(client, "/login/", "member", PASSWORD).content.decode()
    LoginFailure.objects.update(created_at=timezone.now() - throttle.WINDOW - timedelta(seconds=1))
    signed_in = attempt(client, "/login/", "member", PASSWORD)
    assert signed_in.status_code == 302 and client.session["_auth_user_id"]
    assert not LoginFailure.objects.filter(username="member").exists()  # cleared on success


def test_an_address_guessing_many_names_is_refused():
    make_user("member")
    client = Client(REMOTE_ADDR="203.0.113.9")
    for index in range(throttle.PER_ADDRESS):
        attempt(client, "/login/", f"guess{index}", "wrong")
    refused = attempt(client, "/login/", "member", PASSWORD)
    assert "Too many failed sign-ins" in refused.content.decode()
    assert (
        attempt(Client(REMOTE_ADDR="203.0.113.10"), "/login/", "member", PASSWORD).status_code
        == 302
    )


@pytest.mark.parametrize("username", ["", "a\x00b", "x" * 400])
def test_odd_user_names_are_form_errors_not_server_errors(username):
    client = Client()
    page = client.post("/login/", {"username": username, "password": "wrong"})
    assert page.status_code == 200
    assert LoginFailure.objects.count() <= 1
