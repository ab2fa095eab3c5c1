from django.db import transaction

from answers.models import AnswerRun
from answers.pipeline.hooks import WorldClaimRecord
from core.types import User
from worldmodel.models import WorldClaim, WorldStance


def world_claims_record(
    *, user: User, run: AnswerRun, generation: int, claims: list[WorldClaimRecord]
) -> list[WorldClaim]:
    """Record a released comparison's claims in the user's world model.

    Precondition: inside the publication transaction of that comparison (it commits or
    rolls back with the release). `claims`: [{"claim", "stances": [{"fact": CandidateFact,
    "stance", "quote"}]}], every quote already verified and judged."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("world claims are recorded only inside a publication")
    recorded = []
    for claim in claims:
        row = WorldClaim.objects.create(
            user=user, run=run, generation=generation, question=run.question, text=claim["claim"]
        )
        WorldStance.objects.bulk_create(
            WorldStance(
                claim=row,
                document_id=stance["fact"].source["document_id"],
                revision_id=stance["fact"].source["revision_id"],
                fact_id=stance["fact"].fact_id,
                stance=stance["stance"],
                quote=stance["quote"],
            )
            for stance in claim["stances"]
        )
        recorded.append(row)
    return recorded
