"""Middleware for the suite's child processes (Daphne), installed by koinon.settings_test."""

from collections.abc import Callable

from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest, HttpResponse
from guardian.shortcuts import clear_ct_cache


def fresh_content_types(get_response: Callable) -> Callable:
    """Forget cached content types at each request.

    Transactional tests truncate every table; the content types and permissions that Django
    then re-creates get new ids. A long-lived server process would keep the old ids in its
    ContentType cache (and django-guardian in its own), and every object-permission check
    would then find nothing, or fail on ids that no longer agree.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        ContentType.objects.clear_cache()
        clear_ct_cache()
        return get_response(request)

    return middleware
