"""The knowledge app's parts of `/v1/health` (added to core.health.health_checks)."""

from django.db.models import Count

from core.health import ComponentStatus
from knowledge.models import EmbeddingStatus, Passage
from knowledge.selectors import extractions_embedding_stalled, extractions_stale


def check_extractions() -> ComponentStatus:
    """Extraction work that no worker is finishing (knowledge.selectors.extractions_stale)."""
    try:
        stale = extractions_stale().count()
    except Exception:
        return ComponentStatus("extractions", False, "unknown: database unreachable")
    if stale:
        return ComponentStatus(
            "extractions", False, f"{stale} stale (queued or running, no progress)"
        )
    return ComponentStatus("extractions", True, "none stale")


def check_embeddings() -> ComponentStatus:
    """Passages without a vector (vector search cannot find them): failed while an
    extraction waits with no worker embedding it, or the provider was unavailable."""
    try:
        counts = dict(
            Passage.objects.exclude(embedding_status=EmbeddingStatus.EMBEDDED)
            .values_list("embedding_status")
            .annotate(count=Count("pk"))
            .order_by()
        )
        stalled = extractions_embedding_stalled().count()
    except Exception:
        return ComponentStatus("embeddings", False, "unknown: database unreachable")
    pending = counts.get(EmbeddingStatus.PENDING, 0)
    unavailable = counts.get(EmbeddingStatus.UNAVAILABLE, 0)
    if not pending and not unavailable:
        return ComponentStatus("embeddings", True, "every passage embedded")
    parts = [f"{pending} passage(s) waiting"]
    if unavailable:
        parts.append(f"{unavailable} keyword-only (provider unavailable)")
    if stalled:
        parts.append(f"{stalled} extraction(s) stalled (no worker embedding them)")
    return ComponentStatus("embeddings", not (unavailable or stalled), ", ".join(parts))
