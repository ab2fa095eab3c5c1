from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet

from knowledge.selectors import documents_visible_to
from worldmodel.models import WorldClaim, WorldStance


def world_claims_visible_to(*, user: AbstractBaseUser) -> QuerySet[WorldClaim]:
    """The user's own claims, each with only the stances whose document the user may see
    now; a claim left with no visible stance is not shown. Access is re-checked on every
    read: a lost source takes its stances (and their quotes) with it."""
    visible = documents_visible_to(user=user).values("pk")
    stances = WorldStance.objects.filter(document_id__in=visible).order_by("id")
    return (
        WorldClaim.objects.filter(user=user, stances__document_id__in=visible)
        .distinct()
        .prefetch_related(Prefetch("stances", queryset=stances, to_attr="visible_stances"))
    )
