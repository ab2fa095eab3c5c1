"""A space's question sets in the chat, beside its library pages: for the space's curators
only (anyone else gets a 404, as for a space they cannot see).

Thin views: parsing is `answers.question_sets.parsing`, every change a service that checks
the role again, every read a selector. Plain forms, no JavaScript needed; the report is
server-rendered (a table and an inline SVG drawn with presentation attributes: no script,
no inline style, so the page keeps the strict CSP)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from answers.question_sets.figures import curve_svg_points
from answers.question_sets.parsing import (
    MAX_FILE_BYTES,
    MAX_LINE_ERRORS,
    MAX_QUESTIONS,
    QuestionFileInvalid,
    QuestionRow,
    question_format_of,
    questions_check,
    questions_parse,
)
from answers.question_sets.selectors import (
    question_set_get_for_curator,
    question_set_run_get,
    question_set_run_report,
    question_sets_of_space,
)
from answers.question_sets.services import (
    question_set_create,
    question_set_run_start,
    space_operating_point_set,
)
from chat.views import _not_found_is_404, _page
from core.errors import ApiError
from core.types import request_user
from knowledge.selectors import space_get_for_curator

FORM_ROWS = 8  # question rows the browser form offers at once
SVG_WIDTH, SVG_HEIGHT = 480, 200


def _error(request: HttpRequest, error: ApiError) -> None:
    """The error's message (worded in the curator's language where it was raised) and, for
    a refused file, each bad line; the other errors' fields only repeat the message in the
    API's field names."""
    messages.error(request, str(error.detail))
    if isinstance(error, QuestionFileInvalid):
        for line, _code, text in error.lines[:MAX_LINE_ERRORS]:
            messages.error(
                request, _("Line %(line)s: %(problem)s") % {"line": line, "problem": text}
            )
        if (more := len(error.lines) - MAX_LINE_ERRORS) > 0:
            messages.error(
                request,
                ngettext(
                    "%(count)s more line has errors.", "%(count)s more lines have errors.", more
                )
                % {"count": more},
            )


@login_required
@require_http_methods(["GET", "POST"])
@_not_found_is_404
def question_sets(request: HttpRequest, space_id: int) -> HttpResponse:
    """GET: the space's sets and the forms to add one; POST: add one from the form's rows or
    an uploaded CSV/JSONL file (refused whole, each bad line named)."""
    user = request_user(request)
    space = space_get_for_curator(user=user, space_id=space_id)
    status = 200
    if request.method == "POST":
        try:
            question_set = question_set_create(
                user=user, space=space, name=request.POST.get("name", ""), rows=_rows(request)
            )
        except ApiError as error:
            _error(request, error)
            status = error.status_code
        else:
            return redirect("chat:question-set", space.pk, question_set.pk)
    context = {
        "space": space,
        "sets": question_sets_of_space(user=user, space=space),
        "form_rows": range(1, FORM_ROWS + 1),
        "max_kib": MAX_FILE_BYTES // 1024,
        "max_questions": MAX_QUESTIONS,
        "name": request.POST.get("name", ""),
    }
    return _page(request, "chat/question_sets.html", context, status)


def _rows(request: HttpRequest) -> list[QuestionRow]:
    upload = request.FILES.get("file")
    if upload is not None:
        file_format = question_format_of(upload.name or "")
        if upload.size is not None and upload.size > MAX_FILE_BYTES:
            return questions_parse(upload.read(MAX_FILE_BYTES + 1), file_format=file_format)
        return questions_parse(upload.read(), file_format=file_format)
    rows: list[tuple[int, object, object]] = []
    for number in range(1, FORM_ROWS + 1):
        question = request.POST.get(f"question_{number}", "")
        answer = request.POST.get(f"answer_{number}", "")
        if question.strip() or answer.strip():
            rows.append((number, question, answer))
    if not rows:
        raise QuestionFileInvalid(_("Write at least one question."), code="empty_file")
    return questions_check(rows)


def _threshold(raw: str | None) -> float | None:
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and 0.0 < value < 1.0 else None


@login_required
@require_GET
@_not_found_is_404
def question_set(request: HttpRequest, space_id: int, set_id: int) -> HttpResponse:
    """A set: its questions, the figures of a run (the latest, or `?run=`) at its point or
    at `?at=`, the questions behind each figure, and the curve."""
    user = request_user(request)
    space = space_get_for_curator(user=user, space_id=space_id)
    found = question_set_get_for_curator(user=user, space=space, set_id=set_id)
    runs = list(found.runs.all()[:10])
    run = None
    if request.GET.get("run"):
        run = question_set_run_get(question_set=found, run_id=request.GET["run"])
    elif runs:
        run = runs[0]
    report = (
        question_set_run_report(run=run, threshold=_threshold(request.GET.get("at")))
        if run
        else None
    )
    context = {
        "space": space,
        "question_set": found,
        "questions": found.questions.all(),
        "runs": runs,
        "run": run,
        "report": report,
        "svg": curve_svg_points(report.curve, width=SVG_WIDTH, height=SVG_HEIGHT)
        if report
        else None,
        "svg_width": SVG_WIDTH,
        "svg_height": SVG_HEIGHT,
    }
    return _page(request, "chat/question_set.html", context)


@login_required
@require_POST
@_not_found_is_404
def question_set_run(request: HttpRequest, space_id: int, set_id: int) -> HttpResponse:
    user = request_user(request)
    space = space_get_for_curator(user=user, space_id=space_id)
    found = question_set_get_for_curator(user=user, space=space, set_id=set_id)
    try:
        question_set_run_start(user=user, question_set=found, mode=request.POST.get("policy", ""))
    except ApiError as error:
        _error(request, error)
    else:
        messages.success(
            request, _("The questions are being asked; this page shows them as they are answered.")
        )
    return redirect("chat:question-set", space.pk, found.pk)


@login_required
@require_POST
@_not_found_is_404
def space_operating_point(request: HttpRequest, space_id: int) -> HttpResponse:
    """Set the space's operating point from a run's curve (`point`, `run`, `set`), or clear
    it (`point` empty). A point below the run's policy floor is refused with its reason."""
    user = request_user(request)
    space = space_get_for_curator(user=user, space_id=space_id)
    run = None
    found = None
    if request.POST.get("set"):
        found = question_set_get_for_curator(user=user, space=space, set_id=request.POST["set"])
        if request.POST.get("run"):
            run = question_set_run_get(question_set=found, run_id=request.POST["run"])
    raw = request.POST.get("point", "").strip().replace(",", ".")  # 0,56 as typed in German
    try:
        point = float(raw) if raw else None
    except ValueError:
        point = -1.0  # refused by the service as not a probability
    try:
        space_operating_point_set(user=user, space=space, point=point, run=run)
    except ApiError as error:
        _error(request, error)
    else:
        if point is None:
            messages.success(
                request, _("The space's answers are judged at the policy's own point again.")
            )
        else:
            messages.success(
                request,
                _("Later answers from this space are judged at %(point)s at least.")
                % {"point": number_format(point, decimal_pos=2)},
            )
    if found is not None:
        return redirect("chat:question-set", space.pk, found.pk)
    return redirect("chat:question-sets", space.pk)
