"""Sign-in throttling for the password forms (the chat's /login/ and /admin/login/).

Failures are rows in the database, so every web process sees the same counts. Three
limits, within `WINDOW`:

- a user name from one address (the pair): `PER_PAIR` failures refuse that pair until its
  oldest counted failure leaves the window;
- an address, whatever the names: `PER_ADDRESS` failures refuse it the same way;
- a user name, from any addresses: never locked, but after `NAME_BACKOFF_AFTER` failures
  each further try waits a doubling delay after the name's latest failure, at most
  `NAME_BACKOFF_MAX`. Guessing one name from many addresses goes no faster than that,
  and a third party cannot keep the owner out for longer: its own address is locked
  after `PER_PAIR` failures and the owner's is not (issue 48, item 5).

An attempt is reserved before its password is checked (`login_attempt_begin`): under
PostgreSQL advisory transaction locks on its name and its address, the counts are read
and, unless refused, the attempt is stored as a failure, then committed. So concurrent
attempts count each other, and no more passwords are checked than the limits allow. A
successful sign-in removes its pair's failures; an attempt whose password was not checked
(none was given) removes its own row; a wrong password leaves it. A refused attempt
writes nothing and is not checked, so guessing goes no faster.

The address is the connection's (REMOTE_ADDR); behind a proxy that is the proxy, so keep
`PER_ADDRESS` well above `PER_PAIR`.
"""

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.db import connection, transaction
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.inputs import text_is_storable
from core.models import LoginFailure

WINDOW = timedelta(minutes=15)
PER_PAIR = 5
PER_ADDRESS = 30
NAME_BACKOFF_AFTER = 5
NAME_BACKOFF_FIRST = timedelta(seconds=1)
NAME_BACKOFF_MAX = timedelta(seconds=30)

# pg_advisory_xact_lock(namespace, key) namespaces ("ko" high bytes, as knowledge.turns):
# one for user names, one for addresses, each keyed by a 32-bit hash of the value.
_NAME_LOCK = 0x6B6F_1000
_ADDRESS_LOCK = 0x6B6F_1001


class LoginThrottled(Exception):
    """Too many failures: no password may be checked for `wait` seconds."""

    def __init__(self, wait: int) -> None:
        super().__init__(f"sign-in throttled for {wait} s")
        self.wait = wait


@dataclass(frozen=True)
class LoginAttempt:
    """A reserved attempt: `failure_id` is its provisional failure row (None when there
    was no name, so nothing will be checked or counted)."""

    username: str
    address: str | None
    failure_id: int | None


def _username_key(username: str) -> str:
    return username.strip().casefold()[:150]


def _address(request: HttpRequest | None) -> str | None:
    address = (request.META.get("REMOTE_ADDR") or "").strip() if request is not None else ""
    try:
        return forms.GenericIPAddressField().clean(address) if address else None
    except forms.ValidationError:
        return None


def _lock_key(value: str) -> int:
    return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=4).digest(), signed=True)


def _recent(**filters: str | None) -> QuerySet[LoginFailure]:
    since = timezone.now() - WINDOW
    return LoginFailure.objects.filter(**filters, created_at__gt=since).order_by("-created_at")


def _until_limit_leaves(times: list[datetime], limit: int, now: datetime) -> float:
    """Seconds until fewer than `limit` of these failures (newest first) are recent."""
    return (times[limit - 1] + WINDOW - now).total_seconds() if len(times) >= limit else 0


def _wait(*, username: str, address: str | None) -> int:
    """Seconds until this name and address may try a password; 0 when now.
    Precondition: the caller holds the locks of the name and of the address."""
    now = timezone.now()
    waits = [0.0]
    if username:
        pair = _recent(username=username, address=address)
        times = list(pair.values_list("created_at", flat=True)[:PER_PAIR])
        waits.append(_until_limit_leaves(times, PER_PAIR, now))
        name = _recent(username=username).aggregate(failures=Count("pk"), latest=Max("created_at"))
        if name["failures"] >= NAME_BACKOFF_AFTER:
            doublings = min(name["failures"] - NAME_BACKOFF_AFTER, 16)
            delay = min(NAME_BACKOFF_MAX, NAME_BACKOFF_FIRST * 2**doublings)
            waits.append((name["latest"] + delay - now).total_seconds())
    if address:
        times = list(_recent(address=address).values_list("created_at", flat=True)[:PER_ADDRESS])
        waits.append(_until_limit_leaves(times, PER_ADDRESS, now))
    return max(0, math.ceil(max(waits)))


def login_attempt_begin(*, username: str, request: HttpRequest | None) -> LoginAttempt:
    """Reserve a sign-in attempt before its password is checked: raises LoginThrottled
    when a limit is reached, else stores the attempt as a failure (committed before this
    returns, outside an enclosing transaction). A wrong password leaves it so; the caller
    settles the others with `login_attempt_succeeded` or `login_attempt_unchecked`.

    The advisory transaction locks on the name and then the address (always in that
    order, so two attempts never wait for each other in a cycle) make the counting and
    the insert one step: a concurrent attempt sees this one's row (READ COMMITTED reads
    afresh after the lock). Nothing is held while the password is checked."""
    key = _username_key(username)
    address = _address(request)
    with transaction.atomic():
        with connection.cursor() as cursor:
            if key:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_NAME_LOCK, _lock_key(key)])
            if address:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", [_ADDRESS_LOCK, _lock_key(address)]
                )
        wait = _wait(username=key, address=address)
        if wait:
            raise LoginThrottled(wait)
        if not key:
            return LoginAttempt(username=key, address=address, failure_id=None)
        failure = LoginFailure.objects.create(username=key, address=address)
    return LoginAttempt(username=key, address=address, failure_id=failure.pk)


def login_attempt_succeeded(attempt: LoginAttempt) -> None:
    """The password was right: the pair's failures are removed, this attempt's with them
    (other addresses' stay, so a success from here unlocks nobody else)."""
    if attempt.failure_id is not None:
        LoginFailure.objects.filter(username=attempt.username, address=attempt.address).delete()


def login_attempt_unchecked(attempt: LoginAttempt) -> None:
    """No password was checked (the form had none): the attempt's row is removed."""
    if attempt.failure_id is not None:
        LoginFailure.objects.filter(pk=attempt.failure_id).delete()


def login_wait_text(wait: int) -> str:
    """How long to wait, for the refusal: seconds under a minute, else whole minutes."""
    if wait < 60:
        return ngettext("%d second", "%d seconds", wait) % wait
    minutes = -(-wait // 60)
    return ngettext("%d minute", "%d minutes", minutes) % minutes


if TYPE_CHECKING:  # the forms this mixes into, for its use of `data`, `request`, `clean`
    _LoginForm = AuthenticationForm
else:
    _LoginForm = object


class ThrottledLoginMixin(_LoginForm):
    """For Django's authentication forms: reserve the attempt before the password is
    checked (refused while throttled), then settle it."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": _("Too many failed sign-ins. Try again in %(wait)s."),
    }

    throttled = ""  # the message shown when refused for too many failures

    def clean(self) -> dict[str, object]:
        username = self.data.get("username") or ""
        if not isinstance(username, str) or not text_is_storable(username):
            username = ""
        try:
            attempt = login_attempt_begin(username=username, request=self.request)
        except LoginThrottled as refused:
            params = {"wait": login_wait_text(refused.wait)}
            self.throttled = self.error_messages["throttled"] % params
            raise forms.ValidationError(self.throttled, code="throttled") from None
        cleaned = super().clean()  # a wrong password raises: the attempt stays a failure
        if self.get_user() is not None:
            login_attempt_succeeded(attempt)
        else:  # Django checks nothing without a name and a password
            login_attempt_unchecked(attempt)
        return cleaned


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
