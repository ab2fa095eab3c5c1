"""Ports of the answer path, filled by the apps above it in their AppConfig.ready().

The pipeline calls upward only through these (core.ports): memory steers a plan's searches
and rechecks the entries it used before sealing; the world model records a released
comparison's claims inside the publication transaction.
"""

from typing import TYPE_CHECKING, Protocol, TypedDict

from answers.pipeline.vocabulary import Plan, SourceStance
from core.ports import Port

if TYPE_CHECKING:
    from answers.models import AnswerRun, CandidateFact
    from core.types import User
    from knowledge.scope import AccessScope


class PlanSteer(Protocol):
    def __call__(self, *, run: "AnswerRun", plan: Plan, scope: "AccessScope") -> Plan: ...


class MemoryRecheck(Protocol):
    def __call__(self, *, run: "AnswerRun", user: "User", scope: "AccessScope") -> str | None: ...


class WorldStanceRecord(TypedDict):
    """One source's stance on a claim: the fact quoted, its stance and the verified quote."""

    fact: "CandidateFact"
    stance: SourceStance
    quote: str


class WorldClaimRecord(TypedDict):
    """A released comparison's claim with every source's stance on it."""

    claim: str
    stances: list[WorldStanceRecord]


class WorldClaimsRecord(Protocol):
    def __call__(
        self, *, user: "User", run: "AnswerRun", generation: int, claims: list[WorldClaimRecord]
    ) -> object: ...


# The plan with the searches the asker's memory steers (memory).
plan_steer: Port[PlanSteer] = Port("answers.plan_steer")
# A code when a memory entry the plan used is no longer valid in the recheck's fresh scope,
# else None (memory).
memory_recheck: Port[MemoryRecheck] = Port("answers.memory_recheck")
# Records the claims, inside the publication (worldmodel).
world_claims_record: Port[WorldClaimsRecord] = Port("answers.world_claims_record")
