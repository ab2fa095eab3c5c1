"""Issue 27 (7): wrong passwords on /login/ and /admin/login/ are throttled per user name
and address and per address, with a clear message; the right password is not even checked
while throttled; a success clears the pair's count. Issue 48 (5): concurrent attempts are
counted before any password is checked, and failures from elsewhere slow a name down but
never lock its owner out."""

import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import forms as auth_forms
from django.db import connections
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
def test_a_name_with_too_many_wrong_passwords_from_one_address_is_refused_even_with_the_right_one(
    path,
):
    make_user("root", staff=True)
    client = Client()
    for _ in range(throttle.PER_PAIR):
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
    for _ in range(throttle.PER_PAIR):
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


def test_a_form_without_a_password_does_not_clear_the_failures():
    """Django checks nothing without a password and raises no error of its own in clean():
    that is no successful sign-in, so it must not wipe the count it would let an attacker
    reset between guesses."""
    make_user("member")
    client = Client()
    for _ in range(throttle.PER_PAIR - 1):
        attempt(client, "/login/", "member", "wrong")
    attempt(client, "/login/", "member", "")
    attempt(client, "/login/", "member", "wrong")
    refused = attempt(client, "/login/", "member", PASSWORD)
    assert "Too many failed sign-ins. Try again in 15 minutes." in refused.content.decode()
    assert LoginFailure.objects.filter(username="member").count() == throttle.PER_PAIR


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("spread", ["one address", "an address each"])
def test_concurrent_attempts_for_one_name_check_no_more_passwords_than_the_limit(
    monkeypatch, spread
):
    """Issue 48 (5): 20 simultaneous wrong guesses for one name. Every password check is
    held open until each request has either reached its check or been refused, so a
    throttle that counts only stored failures lets all 20 through; one that reserves the
    attempt first checks PER_PAIR (from one address) or NAME_BACKOFF_AFTER (from many: the
    clock stands still, so the back-off has not passed), and the right password after
    them is not checked."""
    moment = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: moment)
    make_user("root", staff=True)
    tries = 20
    checked: list[str] = []
    finished: list[int] = []
    errors: list[BaseException] = []
    release = threading.Event()
    start = threading.Barrier(tries)
    authenticate = auth_forms.authenticate

    def counting_authenticate(request=None, **credentials):
        checked.append(credentials["password"])
        release.wait(timeout=60)
        return authenticate(request, **credentials)

    monkeypatch.setattr(auth_forms, "authenticate", counting_authenticate)

    def guess(index: int) -> None:
        try:
            start.wait()
            address = "203.0.113.5" if spread == "one address" else f"203.0.113.{10 + index}"
            page = attempt(Client(REMOTE_ADDR=address), "/admin/login/", "root", "wrong")
            assert page.status_code == 200
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            finished.append(index)
            connections.close_all()

    threads = [threading.Thread(target=guess, args=(index,)) for index in range(tries)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120  # a guard, not a measurement
    while len(checked) + len(finished) < tries and time.monotonic() < deadline:
        time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    limit = throttle.PER_PAIR if spread == "one address" else throttle.NAME_BACKOFF_AFTER
    assert len(checked) == limit
    assert LoginFailure.objects.filter(username="root").count() == limit
    client = Client(REMOTE_ADDR="203.0.113.5")
    refused = attempt(client, "/admin/login/", "root", PASSWORD)
    assert "Too many failed sign-ins" in refused.content.decode()
    assert len(checked) == limit  # refused without a password check
    assert "_auth_user_id" not in client.session


def move_failures_back(by: timedelta) -> None:
    for failure in LoginFailure.objects.all():
        LoginFailure.objects.filter(pk=failure.pk).update(created_at=failure.created_at - by)


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_another_address_cannot_lock_the_owner_out(path):
    """Issue 48 (5): a third party's wrong passwords lock its own address out for the
    window, but the owner, from theirs, gets in after NAME_BACKOFF_MAX at most."""
    make_user("root", staff=True)
    stranger = Client(REMOTE_ADDR="198.51.100.66")
    for _ in range(throttle.PER_PAIR + 3):
        attempt(stranger, path, "root", "wrong")
    move_failures_back(throttle.NAME_BACKOFF_MAX)
    owner = Client(REMOTE_ADDR="192.0.2.10")
    signed_in = attempt(owner, path, "root", PASSWORD)
    assert signed_in.status_code == 302 and owner.session["_auth_user_id"]
    # The stranger's own address stays locked for the window, the owner's success
    # notwithstanding.
    refused = attempt(stranger, path, "root", PASSWORD)
    assert "Too many failed sign-ins. Try again in 15 minutes." in refused.content.decode()
    assert "_auth_user_id" not in stranger.session


def test_guesses_for_one_name_from_many_addresses_back_off_within_a_bound(monkeypatch):
    """Many addresses, each under its own limits: after NAME_BACKOFF_AFTER failures each
    further try for the name waits a doubling delay after the latest, at most
    NAME_BACKOFF_MAX, and the owner gets in once it has passed. (The clock stands still
    unless the test moves it.)"""
    now = [timezone.now()]
    monkeypatch.setattr(timezone, "now", lambda: now[0])
    make_user("member")
    addresses = (f"203.0.113.{index}" for index in range(100, 200))

    def guess() -> str:
        return attempt(
            Client(REMOTE_ADDR=next(addresses)), "/login/", "member", "wrong"
        ).content.decode()

    for _ in range(throttle.NAME_BACKOFF_AFTER):
        assert "Too many" not in guess()
    waits = []
    for _ in range(8):
        refused = guess()
        assert "Too many failed sign-ins. Try again in" in refused
        waits.append(int(refused.split("Try again in ")[1].split(" second")[0]))
        now[0] += timedelta(seconds=waits[-1])
        assert "Too many" not in guess()
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]
    owner = Client(REMOTE_ADDR="192.0.2.10")
    assert (
        "Try again in 30 seconds." in attempt(owner, "/login/", "member", PASSWORD).content.decode()
    )
    now[0] += throttle.NAME_BACKOFF_MAX
    assert attempt(owner, "/login/", "member", PASSWORD).status_code == 302
