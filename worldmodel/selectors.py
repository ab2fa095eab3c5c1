from django.db.models import Exists, OuterRef, Prefetch, QuerySet

from core.types import User
from knowledge.selectors import documents_visible_to
from worldmodel.models import WorldClaim, WorldStance


def world_claims_visible_to(*, user: User) -> QuerySet[WorldClaim]:
    """The user's own claims whose every stance cites a document the user may see now.
    Access is re-checked on every read: a claim was established by all its sources
    together, so losing any of them hides the claim, its text and all its quotes."""
    visible = documents_visible_to(user=user).values("pk")
    lost = WorldStance.objects.filter(claim=OuterRef("pk")).exclude(document_id__in=visible)
    stances = WorldStance.objects.order_by("id")
    return (
        WorldClaim.objects.filter(user=user, stances__isnull=False)
        .exclude(Exists(lost))
        .distinct()
        .prefetch_related(Prefetch("stances", queryset=stances, to_attr="visible_stances"))
    )
