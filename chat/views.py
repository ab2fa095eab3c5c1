"""The chat UI: thin views over the answer services and the sealed-read boundary.

Every page needs a login; every protected object comes from a scoped selector, and a
missing or foreign one is the same 404. Forms work without JavaScript (a POST answers
inline and redirects to the sealed answer); with it, the ask form adds `live=1` and the
run executes in the worker while the page follows its events."""

import json
from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from answers.models import Conversation
from answers.pipeline.lifecycle import RunFailed, answer_create, answer_retry, answer_stream_start
from answers.pipeline.request import answer_request_parse
from answers.pipeline.texts import LANGUAGES
from answers.selectors import (
    conversation_get_owned,
    conversation_runs,
    conversation_selection,
    conversations_listed,
    run_get_for_user,
)
from answers.services import conversation_sources_set
from chat.forms import AskForm, CorrectionForm, RenameForm, UploadForm
from chat.presenters import activity_labels, file_state, receipt_view, run_views
from chat.sources import quote_page_image, quote_source
from conversations.services import (
    conversation_delete,
    conversation_get_readable,
    conversation_rename,
    conversations_visible_to,
    run_get_for_reader,
)
from core.errors import ApiError, NotFoundError, writing
from core.types import request_user
from knowledge.documents.upload import document_upload
from knowledge.models import Document
from knowledge.selectors import private_files_of, spaces_curated_by, spaces_visible_to
from memory.services import (
    correction_create,
    fact_remember,
    memory_entries_shown,
    memory_entries_visible_to,
    memory_entry_get_for_user,
    memory_revoke,
)


def _not_found_is_404(view: Callable) -> Callable:
    """Selectors raise NotFoundError (the API's 404); in HTML it is Django's 404."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFoundError:
            raise Http404() from None

    return wrapped


def _picker(request: HttpRequest, conversation: Conversation | None) -> dict:
    spaces = list(spaces_visible_to(user=request.user).order_by("name"))
    files = list(private_files_of(user=request.user).prefetch_related("revisions__extractions"))
    if conversation is not None:
        selected_spaces, selected_files = conversation_selection(conversation_id=conversation.pk)
    else:
        selected_spaces, selected_files = set(), set()
    names = [s.name for s in spaces if s.pk in selected_spaces]
    names += [d.title for d in files if d.pk in selected_files]
    return {
        "spaces": [{"space": s, "selected": s.pk in selected_spaces} for s in spaces],
        "files": [
            {"document": d, "selected": d.pk in selected_files, **file_state(d)} for d in files
        ],
        "summary": ", ".join(names) if names else _("every space you may read"),
    }


def _sidebar(request: HttpRequest) -> dict:
    """The conversation list: those started in the chat (`?origin=all`: from anywhere),
    those whose questions hold the words of `?q=`, and those shared with the user."""
    every_origin = request.GET.get("origin") == "all"
    words = request.GET.get("q", "")[:200]
    listed = conversations_listed(user=request.user, every_origin=every_origin, words=words)
    reader = request_user(request)
    shared = conversations_visible_to(user=reader).exclude(user_id=reader.pk)
    return {
        "conversations": list(listed[:100]),
        "shared": list(shared.select_related("user")[:50]),
        "every_origin": every_origin,
        "words": words,
    }


def _page(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    user = request.user
    # Curators (staff who curate a space) and superusers get the admin link; readers do not.
    context["is_curator"] = bool(
        user.is_superuser or (user.is_staff and spaces_curated_by(user=user).exists())
    )
    return render(request, template, context, status=status)


def _ask(request: HttpRequest, form: AskForm, conversation: Conversation | None) -> HttpResponse:
    values = form.cleaned_data
    language = get_language()
    answer_request = answer_request_parse(
        {
            "query": values["query"],
            "conversation_id": conversation.pk if conversation else None,
            "space_ids": values["spaces"],
            "selected_sources": values["files"],
            **({"language": language} if language in LANGUAGES else {}),
        }
    )
    if values["live"]:
        run = answer_stream_start(
            user=request_user(request), request=answer_request, origin=Conversation.Origin.CHAT
        )
        target = reverse("chat:conversation", args=[run.conversation_id])
        return redirect(f"{target}?live={run.pk}#run-{run.pk}")
    try:
        run_id: object = answer_create(
            user=request_user(request), request=answer_request, origin=Conversation.Origin.CHAT
        )["run_id"]
    except RunFailed as failed:
        run_id = failed.run_id  # the page shows the failed run with its notice
        if failed.retry_after:  # the database was lost: say so, asking again will work
            messages.error(request, str(failed.detail))
    run = run_get_for_user(user=request.user, run_id=run_id)
    return redirect(reverse("chat:conversation", args=[run.conversation_id]) + f"#run-{run_id}")


def _form_error(request: HttpRequest, error: ApiError) -> None:
    messages.error(request, str(error.detail))


@login_required
@require_http_methods(["GET", "POST"])
def home(request: HttpRequest) -> HttpResponse:
    """The conversation list and the box for a new question (with its source picker)."""
    form = AskForm(request.POST or None, user=request_user(request))
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                return _ask(request, form, None)
            except ApiError as error:
                _form_error(request, error)
                status = error.status_code
        else:
            status = 422
    context = {**_sidebar(request), "form": form, "picker": _picker(request, None)}
    return _page(request, "chat/home.html", context, status)


@login_required
@require_http_methods(["GET", "POST"])
@_not_found_is_404
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """The messages in order, the question box and the conversation's source picker; a
    conversation shared with the user is shown read-only (its answers as the boundary
    lets this reader see them)."""
    item = conversation_get_readable(user=request_user(request), conversation_id=conversation_id)
    owned = item.user_id == request.user.pk
    if request.method == "POST" and not owned:
        raise Http404()
    form = AskForm(request.POST or None, user=request_user(request))
    status = 200
    if request.method == "POST":
        if form.is_valid() and form.cleaned_data["action"] == "save":
            conversation_sources_set(
                user=request_user(request),
                conversation=item,
                space_ids=form.cleaned_data["spaces"],
                file_ids=form.cleaned_data["files"],
            )
            messages.success(request, _("Selection saved."))
            return redirect("chat:conversation", item.pk)
        if form.is_valid():
            try:
                return _ask(request, form, item)
            except ApiError as error:
                _form_error(request, error)
                status = error.status_code
        else:
            status = 422
    live = request.GET.get("live", "")
    context = {
        **_sidebar(request),
        "conversation": item,
        "owned": owned,
        "runs": run_views(
            user=request_user(request), runs=list(conversation_runs(conversation=item))
        ),
        "live": live,
        "form": form,
        "rename_form": RenameForm(initial={"title": item.title}),
        "picker": _picker(request, item) if owned else None,
        "labels": json.dumps(activity_labels(), ensure_ascii=False),
    }
    return _page(request, "chat/conversation.html", context, status)


@login_required
@require_POST
@_not_found_is_404
def conversation_rename_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    item = conversation_get_owned(user=request.user, conversation_id=conversation_id)
    form = RenameForm(request.POST)
    if form.is_valid():
        try:
            conversation_rename(conversation=item, title=form.cleaned_data["title"])
            messages.success(request, _("Renamed."))
        except ApiError as error:
            _form_error(request, error)
    else:
        messages.error(request, " ".join(str(e) for e in form.errors.get("title", [])))
    return redirect("chat:conversation", item.pk)


@login_required
@require_POST
@_not_found_is_404
def conversation_delete_view(request: HttpRequest, conversation_id: int) -> HttpResponse:
    item = conversation_get_owned(user=request.user, conversation_id=conversation_id)
    conversation_delete(conversation=item)
    messages.success(
        request,
        _(
            "Conversation deleted. The receipts of its answers stay "
            "available to you through the API."
        ),
    )
    return redirect("chat:home")


@login_required
@require_GET
@_not_found_is_404
def answer_fragment(request: HttpRequest, run_id: str) -> HttpResponse:
    """The sealed answer of the run's current generation, for the page's script to show
    after the `completed` (or `failed`) event."""
    run = run_get_for_user(user=request.user, run_id=run_id)
    views = run_views(user=request_user(request), runs=[run])
    view = views[0] if views else None
    if view is None:
        raise Http404()
    return render(request, "chat/_run_answers.html", {"item": view, "owned": True})


@login_required
@require_GET
@_not_found_is_404
def receipt(request: HttpRequest, run_id: str, generation: int) -> HttpResponse:
    run = run_get_for_user(user=request.user, run_id=run_id)
    context = receipt_view(user=request_user(request), run=run, generation=generation)
    if context is None:
        raise Http404()
    return _page(request, "chat/receipt.html", context)


@login_required
@require_GET
@_not_found_is_404
def source(request: HttpRequest, run_id: str, generation: int, number: int) -> HttpResponse:
    """A quotation inside the text it was checked against (chat.sources), for the run's
    owner and whoever the conversation is shared with."""
    run = run_get_for_reader(user=request_user(request), run_id=run_id)
    found = quote_source(user=request_user(request), run=run, generation=generation, number=number)
    return _page(request, "chat/source.html", {"source": found})


@login_required
@require_GET
@_not_found_is_404
def source_page(request: HttpRequest, run_id: str, generation: int, number: int) -> HttpResponse:
    """A PDF citation's page as an image with the quote's lines marked."""
    run = run_get_for_reader(user=request_user(request), run_id=run_id)
    png = quote_page_image(
        user=request_user(request), run=run, generation=generation, number=number
    )
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, no-store"  # document text, as the page itself
    return response


@login_required
@require_POST
@_not_found_is_404
def regenerate(request: HttpRequest, run_id: str) -> HttpResponse:
    """Generation n+1 of the run; earlier generations stay on the page as such."""
    run = run_get_for_user(user=request.user, run_id=run_id)
    try:
        answer_retry(user=request_user(request), run=run)
    except RunFailed:
        pass  # the run's page shows the failed generation with its notice
    except ApiError as error:
        _form_error(request, error)
    target = reverse("chat:conversation", args=[run.conversation_id])
    return redirect(f"{target}#run-{run.pk}")


@login_required
@require_POST
@_not_found_is_404
def file_upload(request: HttpRequest) -> HttpResponse:
    """A private file: stored, its extraction queued, and selected in the conversation."""
    form = UploadForm(request.POST, request.FILES)
    item = None
    if request.POST.get("conversation"):
        item = conversation_get_owned(
            user=request.user, conversation_id=request.POST["conversation"]
        )
    target = reverse("chat:conversation", args=[item.pk]) if item else reverse("chat:home")
    wants_json = "application/json" in request.headers.get("Accept", "")
    if not form.is_valid():
        message = " ".join(str(e) for errors in form.errors.values() for e in errors)
        if wants_json:
            return JsonResponse({"error": {"code": "invalid", "message": message}}, status=422)
        messages.error(request, message)
        return redirect(target)
    upload = form.cleaned_data["file"]
    try:
        result = document_upload(
            user=request_user(request), filename=upload.name, data=upload.read(), private=True
        )
        document = result.document
        if item is not None:
            # Its own write: a database lost here keeps the stored file and says that only
            # the selection was not saved (uploading the same file again selects it).
            with writing(
                _("selecting “%(title)s” in this conversation") % {"title": document.title}
            ):
                spaces, files = conversation_selection(conversation_id=item.pk)
                conversation_sources_set(
                    user=request_user(request),
                    conversation=item,
                    space_ids=spaces,
                    file_ids=files | {document.pk},
                )
    except ApiError as error:
        # 503 `extraction_delayed`: the file is stored and the sweeper queues it later;
        # 503 `database_unavailable`: the upload or its selection was not saved, as it says.
        if wants_json:
            body = {"error": {"code": error.error_code, "message": str(error.detail)}}
            response = JsonResponse(body, status=error.status_code)
            if error.retry_after:
                response["Retry-After"] = str(error.retry_after)
            return response
        _form_error(request, error)
        return redirect(target)
    if wants_json:
        # The file just stored is the user's own: found, with its extractions prefetched.
        document = _file_with_extractions(request, document.pk) or document
        return JsonResponse(
            {
                "document": document.pk,
                "title": document.title,
                "status_url": reverse("chat:file-status", args=[document.pk]),
                **file_state(document),
            },
            status=202,
        )
    messages.info(request, _("File uploaded; its text is being extracted."))
    return redirect(target)


def _file_with_extractions(request: HttpRequest, document_id: int) -> Document | None:
    return (
        private_files_of(user=request.user)
        .filter(pk=document_id)
        .prefetch_related("revisions__extractions")
        .first()
    )


@login_required
@require_GET
@_not_found_is_404
def file_status(request: HttpRequest, document_id: int) -> JsonResponse:
    """The extraction state of one of the user's private files (for the upload progress)."""
    document = _file_with_extractions(request, document_id)
    if document is None:
        raise Http404()
    return JsonResponse({"document": document.pk, **file_state(document)})


@login_required
@require_POST
@_not_found_is_404
def remember(request: HttpRequest, run_id: str) -> HttpResponse:
    """Remember the run's sealed answer in personal memory (its quotes and sources)."""
    run = run_get_for_user(user=request.user, run_id=run_id)
    try:
        fact_remember(user=request_user(request), run=run, scope="personal")
        messages.success(
            request,
            _(
                "Remembered. It will steer later searches; answers still "
                "come from fresh reads of the sources."
            ),
        )
    except ApiError as error:
        _form_error(request, error)
    target = reverse("chat:conversation", args=[run.conversation_id])
    return redirect(f"{target}#run-{run.pk}")


@login_required
@require_http_methods(["GET", "POST"])
def memory(request: HttpRequest) -> HttpResponse:
    """The user's memory (and the project memory of spaces they curate): list, add a
    correction, revoke."""
    form = CorrectionForm(request.POST or None, user=request_user(request))
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                values = form.cleaned_data
                correction_create(
                    user=request_user(request),
                    text=values["text"],
                    scope="personal",
                    space_id=values["space"],
                )
                messages.success(request, _("Correction saved."))
                return redirect("chat:memory")
            except ApiError as error:
                _form_error(request, error)
                status = error.status_code
        else:
            status = 422
    entries = memory_entries_visible_to(user=request_user(request)).select_related("user", "space")
    shown = memory_entries_shown(user=request_user(request), entries=list(entries[:200]))
    context = {"entries": shown, "form": form}
    return _page(request, "chat/memory.html", context, status)


@login_required
@require_POST
@_not_found_is_404
def memory_revoke_view(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = memory_entry_get_for_user(user=request_user(request), entry_id=entry_id)
    memory_revoke(user=request_user(request), entry=entry)
    messages.success(request, _("Revoked: it is not used again."))
    return redirect("chat:memory")
