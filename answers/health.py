"""The answers app's part of `/v1/health` (added to core.health.health_checks)."""

from answers.recovery import generations_stuck
from core.health import ComponentStatus


def check_runs() -> ComponentStatus:
    """Answer runs the sweeper should have settled by now (answers.recovery)."""
    try:
        stuck = generations_stuck().count()
    except Exception:
        return ComponentStatus("runs", False, "unknown: database unreachable")
    if stuck:
        return ComponentStatus("runs", False, f"{stuck} stuck (queued or executing too long)")
    return ComponentStatus("runs", True, "none stuck")
