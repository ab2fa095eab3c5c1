"""The library in the chat: a space's documents for its readers, and for its curators the
way to add files, upload new revisions, withdraw, restore and erase — without admin or an
API key.

Thin views: every change goes through the document services, which check the acting
user's role (knowledge.documents.upload.document_change_check). A space or document the user
cannot see is a 404; one they can see but not change is a 403 with the page and a
message. Forms work without JavaScript; with it, files go up one by one with progress.
"""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from chat.presenters import file_state, text_damage_warning
from chat.views import _not_found_is_404, _page
from core.errors import ApiError, ForbiddenError, NotFoundError, WriteNotSaved
from core.types import request_user
from knowledge.documents.upload import document_change_check, document_upload
from knowledge.erasure import ERASE_REASON_MAX, erase_reason_parse, revision_erase
from knowledge.extraction import SUPPORTED_TYPES, UPLOAD_ACCEPT
from knowledge.lifecycle import WITHDRAW_REASON_MAX, document_restore, document_withdraw
from knowledge.models import Document, Space
from knowledge.selectors import (
    document_get_for_user,
    documents_of_space,
    revision_of_document,
    space_can_create,
    space_can_manage,
    space_get_for_user,
    space_role_of,
    spaces_visible_to,
)


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _space_page(request: HttpRequest, space: Space, status: int = 200) -> HttpResponse:
    documents = [
        {"document": document, "warning": text_damage_warning(document), **file_state(document)}
        for document in documents_of_space(user=request.user, space=space)
    ]
    context = {
        "space": space,
        "documents": documents,
        "can_manage": space_can_manage(user=request_user(request), space=space),
        "supported_types": SUPPORTED_TYPES,
        "accept": UPLOAD_ACCEPT,
        "reason_max": WITHDRAW_REASON_MAX,
        "erase_reason_max": ERASE_REASON_MAX,
    }
    return _page(request, "chat/space.html", context, status)


@login_required
@require_GET
def spaces(request: HttpRequest) -> HttpResponse:
    """The spaces the user may read, with their role in each."""
    rows = [
        {"space": space, "role": space_role_of(user=request_user(request), space=space)}
        for space in spaces_visible_to(user=request.user).order_by("name")
    ]
    context = {"rows": rows, "can_create": space_can_create(user=request.user)}
    return _page(request, "chat/spaces.html", context)


@login_required
@require_GET
@_not_found_is_404
def space(request: HttpRequest, space_id: int) -> HttpResponse:
    return _space_page(request, space_get_for_user(user=request.user, space_id=space_id))


def _refused(request: HttpRequest, space: Space, error: ForbiddenError) -> HttpResponse:
    if _wants_json(request):
        body = {"error": {"code": error.error_code, "message": str(error.detail)}}
        return JsonResponse(body, status=error.status_code)
    messages.error(request, str(error.detail))
    return _space_page(request, space, status=error.status_code)


@login_required
@require_POST
@_not_found_is_404
def space_upload(request: HttpRequest, space_id: int) -> HttpResponse:
    """Files into the space, or (with `document`) a new revision of one of its documents.

    Each file is stored and queued on its own: one refused file (an unsupported type, too
    large) does not lose the others. The answer lists every file's outcome."""
    space = space_get_for_user(user=request.user, space_id=space_id)
    document = None
    if request.POST.get("document"):
        document = document_get_for_user(user=request.user, document_id=request.POST["document"])
    try:
        document_change_check(user=request_user(request), space=space, document=document)
    except ForbiddenError as error:
        return _refused(request, space, error)
    uploads = request.FILES.getlist("file")
    if not uploads or (document is not None and len(uploads) > 1):
        message = _("Choose one file.") if document else _("Choose one or more files.")
        if _wants_json(request):
            return JsonResponse({"error": {"code": "invalid", "message": message}}, status=422)
        messages.error(request, message)
        return redirect("chat:space", space.pk)
    outcomes: list[dict[str, object]] = []  # each sent as JSON or shown as a message
    for upload in uploads:
        try:
            result = document_upload(
                user=request_user(request),
                filename=upload.name or "",  # an uploaded file always has a name
                data=upload.read(),
                space=space,
                document=document,
            )
        except ApiError as error:
            # 503 `extraction_delayed` included: the file is stored, the sweeper queues it.
            outcomes.append(
                {
                    "name": upload.name,
                    "ok": False,
                    "code": error.error_code,
                    "message": str(error.detail),
                }
            )
            continue
        outcomes.append(
            {
                "name": upload.name,
                "ok": True,
                "document": result.document.pk,
                "title": result.document.title,
                "revision": result.revision.number,
                "created": result.created,
                "status_url": reverse("chat:document-status", args=[result.document.pk]),
            }
        )
    if _wants_json(request):
        status = 202 if any(o["ok"] for o in outcomes) else 422
        if all(o.get("code") == WriteNotSaved.default_code for o in outcomes):
            status = 503  # none stored, and sending them again later is expected to work
        return JsonResponse({"files": outcomes}, status=status)
    for outcome in outcomes:
        if outcome["ok"]:
            text = _("%(name)s: stored as revision %(number)s; its text is being extracted.") % {
                "name": outcome["name"],
                "number": outcome["revision"],
            }
            messages.info(request, text)
        else:
            messages.error(request, f"{outcome['name']}: {outcome['message']}")
    return redirect("chat:space", space.pk)


@login_required
@require_GET
@_not_found_is_404
def document_status(request: HttpRequest, document_id: int) -> JsonResponse:
    """A readable document's extraction state (the upload progress polls it)."""
    document = document_get_for_user(user=request.user, document_id=document_id)
    return JsonResponse({"document": document.pk, **file_state(document)})


def _lifecycle(
    request: HttpRequest,
    space_id: int,
    document_id: int,
    change: Callable[[Document], HttpResponse | None],
) -> HttpResponse:
    space = space_get_for_user(user=request.user, space_id=space_id)
    document = document_get_for_user(user=request.user, document_id=document_id)
    if document.space_id != space.pk:
        raise NotFoundError("Document not found.")
    try:
        shown = change(document)
    except ForbiddenError as error:
        return _refused(request, space, error)
    except WriteNotSaved:
        raise  # its page (core.errors) names the change and sends the same form again
    except ApiError as error:  # a missing reason, an erasure made twice
        if error.status_code == 404:
            raise
        messages.error(request, str(error.detail))
        return _space_page(request, space, status=error.status_code)
    if shown is not None:
        return shown
    return redirect(reverse("chat:space", args=[space.pk]) + f"#document-{document.pk}")


@login_required
@require_POST
@_not_found_is_404
def document_withdraw_view(request: HttpRequest, space_id: int, document_id: int) -> HttpResponse:
    reason = (request.POST.get("reason") or "")[:WITHDRAW_REASON_MAX]

    def withdraw(document: Document) -> HttpResponse | None:
        document_withdraw(user=request_user(request), document=document, reason=reason)
        messages.info(
            request,
            _("“%(title)s” is withdrawn: it is no longer searched or quoted.")
            % {"title": document.title},
        )
        return None

    return _lifecycle(request, space_id, document_id, withdraw)


@login_required
@require_POST
@_not_found_is_404
def document_restore_view(request: HttpRequest, space_id: int, document_id: int) -> HttpResponse:
    def restore(document: Document) -> HttpResponse | None:
        document_restore(user=request_user(request), document=document)
        messages.info(
            request,
            _("“%(title)s” is restored: it is searched and quoted again.")
            % {"title": document.title},
        )
        return None

    return _lifecycle(request, space_id, document_id, restore)


@login_required
@require_POST
@_not_found_is_404
def document_erase_view(request: HttpRequest, space_id: int, document_id: int) -> HttpResponse:
    """Erase one revision's text for good (knowledge.erasure checks the role).

    It cannot be undone, so the library's form only asks: a POST without `confirm` changes
    nothing and answers a page saying what erasing removes and what it cannot reach, whose
    button sends the same revision and reason again with `confirm`."""
    confirmed = request.POST.get("confirm") == "yes"
    reason = request.POST.get("reason") or ""

    def erase(document: Document) -> HttpResponse | None:
        revision = revision_of_document(document=document, revision_id=request.POST.get("revision"))
        if not confirmed:
            document_change_check(
                user=request_user(request),
                space=document.space,
                private=document.is_private,
                document=document,
            )
            erase_reason_parse(reason)
            context = {"space": document.space, "document": document, "revision": revision}
            return _page(request, "chat/erase_confirm.html", {**context, "reason": reason})
        revision_erase(
            user=request_user(request), document=document, revision=revision, reason=reason
        )
        messages.info(
            request,
            _("“%(title)s”, revision %(number)s: its text is erased for good.")
            % {"title": document.title, "number": revision.number},
        )
        return None

    return _lifecycle(request, space_id, document_id, erase)
