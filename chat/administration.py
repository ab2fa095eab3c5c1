"""Administration in the chat (issue 51): superusers manage people, staff create spaces,
curators give and take roles, everyone manages their own API keys — without the command
line or Django admin.

Thin views: who may do what is read through selectors (core.selectors, knowledge.selectors)
and every change is one service call. A page the person may not see is a 404, the same as
a page that does not exist. A generated password or a new API key is shown once, on the
answer to the POST that made it (never stored in plain text, never on a later page), and
that answer is not cached.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from chat.forms import ROLE_CHOICES, ApiKeyForm, MemberForm, SpaceCreateForm, UserCreateForm
from chat.views import _not_found_is_404, _page
from core.errors import ApiError, NotFoundError
from core.selectors import (
    api_key_get_owned,
    api_keys_of,
    user_can_manage_users,
    user_get_managed,
    users_managed_by,
)
from core.services import (
    api_key_create,
    api_key_revoke_one,
    password_generate,
    user_active_set,
    user_create,
    user_password_reset,
)
from core.types import request_user
from knowledge.models import Space
from knowledge.selectors import (
    space_can_create,
    space_can_manage,
    space_get_for_curator,
    space_members,
    spaces_visible_to,
)
from knowledge.services import space_create, space_member_remove, space_member_set

# The services' messages are English (the API's); a form shows these instead, by code.
ERROR_TEXTS = {
    "user_exists": gettext_lazy("A user with this name exists."),
    "space_exists": gettext_lazy("A space with this name already exists."),
    "unknown_user": gettext_lazy("No active user by this name."),
    "invalid_role": gettext_lazy("Choose reader or curator."),
    "deactivate_self": gettext_lazy("You cannot deactivate yourself."),
    "member_not_found": gettext_lazy("This person has no role in this space."),
}


def _form_error(form: Form, field: str, error: ApiError) -> None:
    """The service's refusal on the form's field (a name taken, an unknown user), in the
    reader's language where the code is known; otherwise the service's own text (Django's
    name and password validators already speak it)."""
    form.add_error(field, str(ERROR_TEXTS.get(error.error_code, error.detail)))


def _secret_page(
    request: HttpRequest, template: str, context: dict, status: int = 200
) -> HttpResponse:
    response = _page(request, template, context, status)
    add_never_cache_headers(response)  # the page holds a password or key, shown this once
    return response


# --- people (superusers) ---------------------------------------------------------------


def _users_page(
    request: HttpRequest, form: UserCreateForm, secret: dict | None = None, status: int = 200
) -> HttpResponse:
    context = {
        "form": form,
        "people": users_managed_by(user=request.user),
        "spaces": spaces_visible_to(user=request.user).order_by("name"),
        "secret": secret,
    }
    if secret is not None:
        return _secret_page(request, "chat/users.html", context, status)
    return _page(request, "chat/users.html", context, status)


@login_required
@require_http_methods(["GET", "POST"])
def users(request: HttpRequest) -> HttpResponse:
    """Every user, with a form to create one; the new user's password is shown once."""
    if not user_can_manage_users(user=request.user):
        raise Http404()
    form = UserCreateForm(request.POST or None)
    if request.method == "GET":
        return _users_page(request, form)
    if not form.is_valid():
        return _users_page(request, form, status=422)
    password = password_generate()
    try:
        created = user_create(
            username=form.cleaned_data["username"],
            email=form.cleaned_data["email"],
            password=password,
            staff=form.cleaned_data["staff"],
            superuser=form.cleaned_data["superuser"],
        )
    except ApiError as error:
        _form_error(form, "username", error)
        return _users_page(request, form, status=422)
    secret = {
        "username": created.get_username(),
        "text": _("%(name)s is created. Their password, shown only now:")
        % {"name": created.get_username()},
        "value": password,
    }
    return _users_page(request, UserCreateForm(), secret)


@login_required
@require_POST
@_not_found_is_404
def user_active(request: HttpRequest, user_id: int) -> HttpResponse:
    """Deactivate (`active=0`) or reactivate (`active=1`) a user."""
    person = user_get_managed(user=request.user, user_id=user_id)
    active = request.POST.get("active") == "1"
    try:
        user_active_set(user=person, active=active, acting=request_user(request))
    except ApiError as error:
        messages.error(request, str(ERROR_TEXTS.get(error.error_code, error.detail)))
        return redirect("chat:users")
    text = _("%(name)s is active again.") if active else _("%(name)s is deactivated.")
    messages.success(request, text % {"name": person.get_username()})
    return redirect("chat:users")


@login_required
@require_POST
@_not_found_is_404
def user_password(request: HttpRequest, user_id: int) -> HttpResponse:
    """A new generated password for a user, shown once on this answer."""
    person = user_get_managed(user=request.user, user_id=user_id)
    secret = {
        "username": person.get_username(),
        "text": _("The new password of %(name)s, shown only now:")
        % {"name": person.get_username()},
        "value": user_password_reset(user=person),
    }
    return _users_page(request, UserCreateForm(), secret)


# --- spaces and their members (staff create, curators manage) ---------------------------


@login_required
@require_http_methods(["GET", "POST"])
def space_new(request: HttpRequest) -> HttpResponse:
    """A new space, whose creator becomes its first curator."""
    if not space_can_create(user=request.user):
        raise Http404()
    form = SpaceCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            space = space_create(
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                created_by=request_user(request),
            )
        except ApiError as error:
            if error.status_code >= 500:
                raise  # the database is away: its own page says so (core.errors)
            _form_error(form, "name", error)
        else:
            messages.success(
                request, _("The space “%(name)s” is created; you curate it.") % {"name": space.name}
            )
            return redirect("chat:space-members", space.pk)
    status = 422 if form.errors else 200
    return _page(request, "chat/space_new.html", {"form": form}, status)


def _members_page(
    request: HttpRequest, space: Space, form: MemberForm, status: int = 200
) -> HttpResponse:
    context = {"space": space, "form": form, "members": space_members(space=space)}
    return _page(request, "chat/space_members.html", context, status)


@login_required
@require_http_methods(["GET", "POST"])
@_not_found_is_404
def space_members_view(request: HttpRequest, space_id: int) -> HttpResponse:
    """Who reads and who curates the space; its curators give a person a role here."""
    space = space_get_for_curator(user=request.user, space_id=space_id)
    form = MemberForm(request.POST or None)
    if request.method == "GET":
        return _members_page(request, space, form)
    if not form.is_valid():
        return _members_page(request, space, form, status=422)
    try:
        member = space_member_set(
            space=space, username=form.cleaned_data["username"], role=form.cleaned_data["role"]
        )
    except ApiError as error:
        if error.status_code >= 500:
            raise
        _form_error(form, "username", error)
        return _members_page(request, space, form, status=422)
    role = dict(ROLE_CHOICES)[form.cleaned_data["role"]]
    messages.success(
        request, _("%(name)s is now %(role)s.") % {"name": member.get_username(), "role": role}
    )
    return redirect("chat:space-members", space.pk)


@login_required
@require_POST
@_not_found_is_404
def space_member_remove_view(request: HttpRequest, space_id: int) -> HttpResponse:
    space = space_get_for_curator(user=request.user, space_id=space_id)
    username = request.POST.get("username", "")[:150]
    try:
        space_member_remove(space=space, username=username)
    except NotFoundError as error:  # not a member: a message on the page, not a 404
        messages.error(request, str(ERROR_TEXTS.get(error.error_code, error.detail)))
        return redirect("chat:space-members", space.pk)
    text = _("%(name)s has no role in this space any more.") % {"name": username}
    messages.success(request, text)
    if not space_can_manage(user=request_user(request), space=space):
        return redirect("chat:spaces")  # a curator who removed themselves
    return redirect("chat:space-members", space.pk)


# --- API keys (everyone, their own) -----------------------------------------------------


def _keys_page(
    request: HttpRequest, form: ApiKeyForm, secret: dict | None = None, status: int = 200
) -> HttpResponse:
    context = {"form": form, "keys": api_keys_of(user=request_user(request)), "secret": secret}
    if secret is not None:
        return _secret_page(request, "chat/api_keys.html", context, status)
    return _page(request, "chat/api_keys.html", context, status)


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request: HttpRequest) -> HttpResponse:
    """The person's own keys; a new key is shown once, on the answer that made it."""
    form = ApiKeyForm(request.POST or None)
    if request.method == "GET":
        return _keys_page(request, form)
    if not form.is_valid():
        return _keys_page(request, form, status=422)
    issued = api_key_create(user=request_user(request), name=form.cleaned_data["name"])
    secret = {
        "text": _("Your new key “%(name)s”, shown only now: copy it.")
        % {"name": issued.api_key.name},
        "value": issued.secret,
    }
    return _keys_page(request, ApiKeyForm(), secret)


@login_required
@require_POST
@_not_found_is_404
def api_key_revoke(request: HttpRequest, api_key_id: int) -> HttpResponse:
    """Revoke one of the person's own keys: it fails from the next request on."""
    api_key = api_key_get_owned(user=request_user(request), api_key_id=api_key_id)
    api_key_revoke_one(api_key_id=api_key.pk)
    messages.success(request, _("The key %(prefix)s… is revoked.") % {"prefix": api_key.prefix})
    return redirect("chat:api-keys")
