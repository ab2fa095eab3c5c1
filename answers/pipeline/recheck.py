"""The permission recheck immediately before sealing (SPEC §1.6)."""

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError

from answers.models import AnswerRun
from answers.pipeline.validation import SelectedFact
from core.models import ApiKey
from datasets.selectors import datasets_visible_to
from knowledge.selectors import documents_visible_to

logger = logging.getLogger(__name__)


def publication_recheck(
    *, run: AnswerRun, user: AbstractBaseUser, api_key: ApiKey | None, selected: list[SelectedFact]
) -> str | None:
    """None when publication may go ahead, else the typed reason.

    Re-reads from the database: the originating key is not revoked, the user is active,
    every selected document and dataset is still visible, and every private file is
    still among the run's selected sources. A database failure is
    `permission_unavailable`: unknown is never treated as allowed.
    """
    try:
        if (
            api_key is not None
            and not ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).exists()
        ):
            return "access_denied"
        current = type(user).objects.filter(pk=user.pk, is_active=True).first()
        if current is None:
            return "access_denied"
        documents = {s.fact.source["document_id"] for s in selected if s.fact.kind == "quote"}
        visible = documents_visible_to(user=current).filter(pk__in=documents)
        if set(visible.values_list("pk", flat=True)) != documents:
            return "access_denied"
        private = set(visible.filter(owner__isnull=False).values_list("pk", flat=True))
        if not private <= set(run.selected_sources):
            return "access_denied"
        datasets = {s.fact.source["dataset_id"] for s in selected if s.fact.kind == "value"}
        seen = datasets_visible_to(user=current).filter(pk__in=datasets)
        if set(seen.values_list("pk", flat=True)) != datasets:
            return "access_denied"
    except DatabaseError:
        logger.exception("permission recheck failed")
        return "permission_unavailable"
    return None
