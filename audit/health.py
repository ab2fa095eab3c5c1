"""The audit app's part of `/v1/health` (added to core.health.health_checks)."""

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone

from audit.models import OutputRelease
from core.health import ComponentStatus


def check_answer_log() -> ComponentStatus:
    """Failed while a release has waited longer than KOINON_LOG_INTEGRATE_SECONDS to enter
    the answer log (the worker that integrates it is down or stuck): its receipt cannot be
    proved meanwhile. Counts and ages only."""
    limit = settings.KOINON_LOG_INTEGRATE_SECONDS
    try:
        waiting = OutputRelease.objects.filter(log_entry__isnull=True).aggregate(
            count=Count("id"), oldest=Min("created_at")
        )
    except Exception:
        return ComponentStatus("answer_log", False, "unknown: database unreachable")
    if not waiting["count"]:
        return ComponentStatus("answer_log", True, "every release integrated")
    age = (timezone.now() - waiting["oldest"]).total_seconds()
    detail = f"{waiting['count']} release(s) waiting, the oldest for {age:.0f} s (limit {limit} s)"
    return ComponentStatus("answer_log", age <= limit, detail)
