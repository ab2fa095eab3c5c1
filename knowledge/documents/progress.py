"""Signs of life of the work on a revision: what the sweeper and health read to tell work
under way from work lost (knowledge.selectors.extractions_stale)."""

from django.utils import timezone

from knowledge.models import Extraction, ExtractionStatus


def extraction_set(extraction: Extraction, **fields: object) -> None:
    """Save `fields` of an extraction, with a heartbeat."""
    fields["heartbeat_at"] = timezone.now()
    for name, value in fields.items():
        setattr(extraction, name, value)
    extraction.save(update_fields=list(fields))


def revision_heartbeat(revision_id: int) -> None:
    """A sign of life for every unfinished extraction of the revision being worked on."""
    Extraction.objects.filter(
        revision_id=revision_id,
        status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING],
    ).update(heartbeat_at=timezone.now())
