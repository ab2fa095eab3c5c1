"""The run's working types: what one generation reads (`RunContext`), what it records
(`Trace`), what selection and gathering hand on (`Selection`, `Gathered`), how it ends
(`Ending`, inside a `Decision`), and the body it is built into (`AnswerBody`). The words
and values they are made of are the vocabulary's (`answers.pipeline.vocabulary`); the
steps are in `gathering`, `selection`, `endings`, `strategies` and `sealing`, run by
`lifecycle`."""

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from answers.models import AnswerRun, CandidateFact, Generation
from answers.pipeline.events import EventSink, StreamEvent, tool_event
from answers.pipeline.validation import SelectedFact
from answers.pipeline.vocabulary import (
    AnswerRequest,
    AnswerStatus,
    Card,
    Citation,
    Completeness,
    EndingKind,
    EvidenceStatus,
    Mode,
    Outcome,
    Plan,
    PolicyRecord,
    SourceRef,
)
from core.models import ApiKey
from core.types import User
from knowledge.scope import AccessScope

if TYPE_CHECKING:
    # Only named in fields: the provider is chosen by the lifecycle, the support built by
    # the judgement and the world claims recorded through the port; the steps that use
    # them import them.
    from answers.pipeline.hooks import WorldClaimRecord
    from answers.pipeline.judgement import Support
    from answers.pipeline.providers.base import ModelProvider


class Evidence(TypedDict):
    """What an ending says of its evidence (the body adds the policy)."""

    status: EvidenceStatus
    answer_status: AnswerStatus
    sources: list[SourceRef]
    outcomes: list[Outcome]


class Quality(TypedDict):
    completeness: Completeness
    degraded: bool
    issues: list[str]


class AnswerText(TypedDict):
    text: str
    language: str
    citations: list[Citation]
    cards: list[Card]


class BodyEvidence(Evidence):
    policy: PolicyRecord


class _Body(TypedDict):
    run_id: str
    generation: int
    mode: Mode
    answer: AnswerText
    evidence: BodyEvidence
    quality: Quality


class AnswerBody(_Body, total=False):
    """The response body (SPEC §5) as stored on the run and returned: `release` once
    sealed (None for inspection output), `label`/`plan`/`results` for inspection output,
    `trace` in debug mode."""

    release: dict[str, Any] | None
    label: str
    plan: dict[str, object]
    results: list[dict[str, object]]
    trace: dict[str, Any]


class ProviderFailed(Exception):
    """The model provider raised while planning: a typed failure of the run."""


@dataclass(frozen=True)
class RunContext:
    """What one execution reads: the stored run and generation, the request as stored,
    the provider, the conversation's earlier questions, where live events go, and the
    asker's access scope, read once for the whole gathering (the publication's recheck
    reads a fresh one under its locks)."""

    run: AnswerRun
    generation: Generation
    request: AnswerRequest
    provider: "ModelProvider"
    history: tuple[str, ...]
    events: EventSink
    scope: AccessScope

    @property
    def user(self) -> User:
        return self.run.user

    @property
    def api_key(self) -> ApiKey | None:
        return self.run.api_key

    @property
    def language(self) -> str:
        return self.run.language


@dataclass
class Trace:
    """The record of a generation so far: timed steps and tool outcomes."""

    steps: list[dict[str, object]] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    # The stream events after `started`, in the order they were sent live.
    events: list[StreamEvent] = field(default_factory=list)
    # The support judge's threshold this generation judged at (judgement.operating_point),
    # once selection has begun; sealed into an answer's `evidence.policy`.
    operating_point: float | None = None
    _sent_outcomes: set[int] = field(default_factory=set)

    def step(self, name: str, started: float, **details: object) -> None:
        """A step that began at `started` (`time.perf_counter()`) and ends now."""
        self.timed(name, round((time.perf_counter() - started) * 1000, 2), **details)

    def timed(self, name: str, ms: float, **details: object) -> None:
        """A step timed where it ran (a refused recheck, inside the publication)."""
        self.steps.append({"step": name, "ms": ms, **details})

    def emit(
        self,
        ctx: "RunContext",
        event: StreamEvent,
        outcome: Outcome | None = None,
    ) -> None:
        """Send one event live, numbered as it will be stored."""
        self.events.append(event)
        if outcome is not None:
            self._sent_outcomes.add(id(outcome))
        name, data = event
        ctx.events.event(
            run_id=ctx.run.pk,
            generation=ctx.generation.number,
            seq=len(self.events) + 1,
            name=name,
            data=data,
        )

    def stream_events(self) -> list[StreamEvent]:
        """What a replay shows after `started`: the events as sent live, then the tool
        outcomes that were never sent (a recheck's, a failure's)."""
        unsent = [o for o in self.outcomes if id(o) not in self._sent_outcomes]
        return [*self.events, *(tool_event(o) for o in unsent)]


@dataclass(frozen=True)
class Selection:
    """The outcome of selection → validation → judgement, over all attempts."""

    support: "Support | None"  # the judged selection that answers most parts; None: none valid
    issues: tuple[str, ...]
    attempts: int
    judge_unavailable: bool = False
    plans: tuple[Plan, ...] = ()  # every round's plan, the first (stored on the run) first


@dataclass(frozen=True)
class Gathered:
    """What the tool rounds found and what was selected from it."""

    plan: Plan
    candidates: tuple[CandidateFact, ...]
    support: "Support | None"
    issues: tuple[str, ...]
    attempts: int
    judge_unavailable: bool = False
    plans: tuple[Plan, ...] = ()  # every round's plan, the first (stored on the run) first


@dataclass(frozen=True)
class Inspected:
    """What the plan mode (`plan`) or the raw mode (`results`) shows instead of an answer."""

    plan: dict[str, object] | None = None
    results: list[dict[str, object]] | None = None


@dataclass(frozen=True)
class Ending:
    """How a generation ends, before it is built into a body and sealed: an answer, a
    fixed refusal, or inspection output (plan and raw modes; no release)."""

    kind: EndingKind
    text: str
    evidence: Evidence
    quality: Quality
    citations: tuple[Citation, ...] = ()
    cards: tuple[Card, ...] = ()
    selected: tuple[SelectedFact, ...] = ()
    inspected: "Inspected | None" = None  # inspection output: the plan, or the candidates
    # A comparison's claims, for the asker's world model.
    world_claims: tuple["WorldClaimRecord", ...] = ()


@dataclass(frozen=True)
class Decision:
    ending: Ending
    candidates: tuple[CandidateFact, ...] = ()
    # Selection attempts of this execution, added to the generation's count when it is
    # published (a release names the generation when > 0).
    attempts: int = 0
    issues: tuple[str, ...] = ()  # issues of the selection, kept by a later refusal
    plans: tuple[Plan, ...] = ()  # every round's plan, kept in the audit
