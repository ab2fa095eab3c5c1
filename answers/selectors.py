import uuid

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

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
