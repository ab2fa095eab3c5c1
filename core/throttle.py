"""Sign-in throttling for the password forms (the chat's /login/ and /admin/login/).

Failures are rows in the database, so every web process sees the same counts. Within
`WINDOW`, a user name with `PER_USERNAME` failures, or an address with `PER_ADDRESS`,
is refused until its oldest counted failure leaves the window — without the password
being checked, so guessing goes no faster. A successful sign-in clears its name's
failures. The address is the connection's (REMOTE_ADDR); behind a proxy that is the
proxy, so keep `PER_ADDRESS` well above `PER_USERNAME`.
"""

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.inputs import text_is_storable
from core.models import LoginFailure

WINDOW = timedelta(minutes=15)
PER_USERNAME = 5
PER_ADDRESS = 30


def _username_key(username: str) -> str:
    return username.strip().casefold()[:150]


def _address(request: HttpRequest | None) -> str | None:
    address = (request.META.get("REMOTE_ADDR") or "").strip() if request is not None else ""
    try:
        return forms.GenericIPAddressField().clean(address) if address else None
    except forms.ValidationError:
        return None


def login_wait(*, username: str, request: HttpRequest | None) -> int:
    """Seconds until this name and address may try a password again; 0 when now."""
    since = timezone.now() - WINDOW
    waits = []
    for field, value, limit in (
        ("username", _username_key(username), PER_USERNAME),
        ("address", _address(request), PER_ADDRESS),
    ):
        if not value:
            continue
        recent = LoginFailure.objects.filter(**{field: value}, created_at__gt=since)
        times = list(recent.order_by("-created_at").values_list("created_at", flat=True)[:limit])
        if len(times) >= limit:
            waits.append((times[-1] + WINDOW - timezone.now()).total_seconds())
    return max(0, int(max(waits, default=0)) + (1 if waits else 0))


def login_failed(*, username: str, request: HttpRequest | None) -> None:
    LoginFailure.objects.create(username=_username_key(username), address=_address(request))


def login_succeeded(*, username: str) -> None:
    LoginFailure.objects.filter(username=_username_key(username)).delete()


if TYPE_CHECKING:  # the forms this mixes into, for its use of `data`, `request`, `clean`
    _LoginForm = AuthenticationForm
else:
    _LoginForm = object


class ThrottledLoginMixin(_LoginForm):
    """For Django's authentication forms: refuse while throttled, count each failure."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": _("Too many failed sign-ins. Try again in %(minutes)s."),
    }

    throttled = ""  # the message shown when refused for too many failures

    def clean(self) -> dict[str, Any]:
        username = self.data.get("username") or ""
        if not isinstance(username, str) or not text_is_storable(username):
            username = ""
        wait = login_wait(username=username, request=self.request)
        if wait:
            minutes = max(1, -(-wait // 60))
            params = {"minutes": ngettext("%d minute", "%d minutes", minutes) % minutes}
            self.throttled = self.error_messages["throttled"] % params
            raise forms.ValidationError(self.throttled, code="throttled")
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username:
                login_failed(username=username, request=self.request)
            raise
        login_succeeded(username=username)
        return cleaned


class ThrottledAuthenticationForm(ThrottledLoginMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(ThrottledLoginMixin, AdminAuthenticationForm):
    pass
