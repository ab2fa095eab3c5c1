import uuid

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Max

from answers.models import AnswerRun
from core.errors import NotFoundError


def run_get_for_user(*, user: AbstractBaseUser | AnonymousUser, run_id: object) -> AnswerRun:
    """The user's own run; NotFoundError whether missing or someone else's."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError("Run not found.") from None
    run = AnswerRun.objects.filter(pk=pk, user_id=user.pk).first()
    if run is None:
        raise NotFoundError("Run not found.")
    return run


def run_capture_current(capture: dict) -> bool:
    """Whether an output capture (run, generation, release id) is still the run's
    current answer: no newer generation, and that release is the one its body carries.
    A conversation-derived proposal is approvable only while this holds (SPEC §3)."""
    try:
        pk = uuid.UUID(str(capture.get("run_id")))
    except ValueError:
        return False
    run = AnswerRun.objects.filter(pk=pk).first()
    if run is None:
        return False
    newest = run.generations.aggregate(top=Max("number"))["top"] or 0
    if newest != capture.get("generation"):
        return False
    return ((run.response or {}).get("release") or {}).get("id") == capture.get("release_id")
