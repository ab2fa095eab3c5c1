"""The user types the apps share.

`User` is the model behind AUTH_USER_MODEL (Django's own); `UserOrAnonymous` is what
`request.user` holds before an authentication check. Services and selectors take a `User`;
an edge behind an authentication check gets one with `request_user(request)`.
"""

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request

type UserOrAnonymous = User | AnonymousUser


def request_user(request: HttpRequest | Request) -> User:
    """The authenticated user of a request that passed an authentication check.

    Raises PermissionDenied for an anonymous request, which such a view never sees.
    """
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied
    return user
