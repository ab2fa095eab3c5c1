"""The one boundary every read of a sealed answer passes (runs, event replay, exports,
shares, MCP): the caller may see every source the answer cites, now — or they get the
fixed access-failure text instead of it; a cited revision erased since gives the fixed
"erased on <date>" notice, a cited document withdrawn since the "source withdrawn" one.
Sealed text never outlives the access it was sealed under, nor the text it quoted."""

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date
from typing import Any

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import OuterRef
from django.db.models.functions import JSONObject
from django.utils.dateparse import parse_datetime

from answers.models import AnswerRun
from answers.pipeline import texts
from audit.log import log_positions
from audit.models import StreamEvent
from core.types import User, UserOrAnonymous
from datasets.models import Dataset
from datasets.selectors import datasets_visible_to
from knowledge.models import Document, Erasure
from knowledge.selectors import documents_visible_to


def sources_visible(*, user: UserOrAnonymous, sources: list[dict]) -> bool:
    """Whether every cited source (revision or snapshot reference) is visible to user."""
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    if documents and documents_visible_to(user=user).filter(pk__in=documents).count() != len(
        documents
    ):
        return False
    return not datasets or datasets_visible_to(user=user).filter(pk__in=datasets).count() == len(
        datasets
    )


def sources_in_space(*, sources: list[dict], space_id: int) -> bool:
    """Whether every cited document and dataset belongs to that space."""
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    if documents and Document.objects.filter(pk__in=documents, space_id=space_id).count() != len(
        documents
    ):
        return False
    return not datasets or Dataset.objects.filter(
        pk__in=datasets, space_id=space_id
    ).count() == len(datasets)


@dataclass(frozen=True)
class SourceStates:
    """What a reader may see of cited sources now: which documents and datasets are
    visible to them, which of those documents were withdrawn since, and which of their
    revisions were erased (revision id → the day)."""

    documents: frozenset[int]
    withdrawn: frozenset[int]
    datasets: frozenset[int]
    erased: dict[int, date] = field(default_factory=dict)

    def visible(self, source: dict) -> bool:
        if source.get("type") == "revision":
            return source["document_id"] in self.documents
        if source.get("type") == "snapshot":
            return source["dataset_id"] in self.datasets
        return True

    def is_withdrawn(self, source: dict) -> bool:
        return source.get("type") == "revision" and source["document_id"] in self.withdrawn

    def erased_on(self, source: dict) -> date | None:
        if source.get("type") != "revision":
            return None
        revision_id = source.get("id")
        return self.erased.get(revision_id) if revision_id is not None else None

    def sealed(self, body: dict) -> dict:
        """The body as this reader may read it: the access-failure text when a source is
        hidden from them (first: a hidden source reveals nothing, not even an erasure),
        the "erased on <date>" notice when a quoted revision was erased (its earliest
        day), the "source withdrawn" notice when a document was withdrawn, else the body
        itself."""
        sources = body.get("evidence", {}).get("sources", [])
        if not all(self.visible(source) for source in sources):
            return access_failure_body(body)
        days = [day for day in map(self.erased_on, sources) if day is not None]
        if days:
            return notice_body(body, kind="source_erased", day=min(days))
        if any(self.is_withdrawn(source) for source in sources):
            return notice_body(body, kind="source_withdrawn")
        return body


def source_states(*, user: UserOrAnonymous, sources: list[dict]) -> SourceStates:
    """The states of these source references (revisions, snapshots) for the user now: at
    most two statements for any number of them."""
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    erasures = ArraySubquery(
        Erasure.objects.filter(document=OuterRef("pk")).values(
            json=JSONObject(revision="revision_id", at="erased_at")
        )
    )
    rows = (
        documents_visible_to(user=user)
        .filter(pk__in=documents)
        .annotate(erased_revisions=erasures)
        .values_list("pk", "withdrawn_at", "erased_revisions")
        if documents
        else []
    )
    seen = {pk: withdrawn_at for pk, withdrawn_at, _ in rows}
    erased = {item["revision"]: _day(item["at"]) for _, _, found in rows for item in found}
    seen_datasets = (
        set(datasets_visible_to(user=user).filter(pk__in=datasets).values_list("pk", flat=True))
        if datasets
        else set()
    )
    return SourceStates(
        documents=frozenset(seen),
        withdrawn=frozenset(pk for pk, withdrawn_at in seen.items() if withdrawn_at),
        datasets=frozenset(seen_datasets),
        erased=erased,
    )


def _day(instant: str) -> date:
    """The UTC day of an erasure instant as JSON gives it (`2026-12-02T10:00:00+00:00`)."""
    parsed = parse_datetime(instant)
    return parsed.astimezone(UTC).date() if parsed is not None else date.min


def source_visibility(*, user: UserOrAnonymous, sources: list[dict]) -> Callable[[dict], bool]:
    """Whether each of these source references is visible to the user now."""
    return source_states(user=user, sources=sources).visible


def access_failure_body(body: dict) -> dict:
    """The sealed body's frame with the fixed access-failure text: no prose, citations,
    cards, sources or release claims."""
    return notice_body(body, kind="access_failure")


NOTICE_ISSUES = {
    "access_failure": "access_denied",
    "source_erased": "source_erased",
    "source_withdrawn": "source_withdrawn",
}


def notice_of(body: dict) -> str | None:
    """Which fixed notice a read body carries instead of its sealed answer (a kind of
    NOTICE_ISSUES), or None for the sealed answer itself."""
    if body.get("release"):
        return None
    issues = (body.get("quality") or {}).get("issues") or []
    return next(
        (kind for kind, issue in NOTICE_ISSUES.items() if issue in issues), "access_failure"
    )


def notice_body(body: dict, *, kind: str, day: date | None = None) -> dict:
    """The sealed body's frame with a fixed notice (`access_failure`, `source_erased` on
    `day`, `source_withdrawn`) in place of the answer: no prose, citations, cards, sources
    or release claims."""
    language = body.get("answer", {}).get("language", "en")
    text = (
        texts.erased_notice(language, day)
        if kind == "source_erased"
        else texts.explanation(kind, language)
    )
    return {
        "run_id": body["run_id"],
        "generation": body["generation"],
        "mode": body.get("mode"),
        "answer": {
            "text": text,
            "language": language,
            "citations": [],
            "cards": [],
        },
        "evidence": {
            "status": "unavailable",
            "answer_status": "abstained",
            "policy": body.get("evidence", {}).get("policy", {}),
            "sources": [],
            "outcomes": [],
        },
        "quality": {"completeness": "none", "degraded": True, "issues": [NOTICE_ISSUES[kind]]},
        "release": None,
    }


def sealed_answer_read(
    *, user: UserOrAnonymous, run: AnswerRun, generation: int | None = None
) -> dict | None:
    """The run's sealed body as the caller may read it now; None if nothing was sealed.

    Without `generation`, the current answer (the run's final body); with it, that
    generation's body exactly as it was sealed (its `completed` event, written in the
    publication transaction), so earlier generations stay readable as such.

    Precondition: `run` came from a permission-scoped selector (it is the caller's).
    """
    if generation is None:
        body = run.response
    else:
        event = StreamEvent.objects.filter(
            run=run, generation=generation, event="completed"
        ).first()
        body = event.data["payload"]["result"] if event is not None else None
    if body is None:
        return None
    sources = body.get("evidence", {}).get("sources", [])
    if not sources:
        return body
    return source_states(user=user, sources=sources).sealed(body)


def sealed_answers_read(
    *, user: UserOrAnonymous, runs: list[AnswerRun]
) -> dict[tuple[object, int], dict]:
    """Every sealed generation of `runs`, keyed (run id, generation), each as the caller
    may read it now — the same rule as `sealed_answer_read`, in three queries for a whole
    conversation. A generation with nothing sealed has no key.

    Precondition: the runs came from a permission-scoped selector (they are the caller's).
    """
    events = StreamEvent.objects.filter(run__in=runs, event="completed")
    bodies = {(e.run_id, e.generation): e.data["payload"]["result"] for e in events}
    cited = [s for body in bodies.values() for s in body.get("evidence", {}).get("sources", [])]
    states = source_states(user=user, sources=cited)
    return {key: states.sealed(body) for key, body in bodies.items()}


def receipt_with_log(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body with its receipt's place in the answer log read beside it, once the release
    is integrated: `release.log` holds the log index and the first signed checkpoint covering
    it (null until one is signed). Absent before integration, so a body read then is the
    response and the replayed `completed` payload exactly. Added on reading, never stored:
    the sealed body, and every hash of the receipt, stay as sealed."""
    return bodies_with_log({0: body})[0]


def bodies_with_log[K](bodies: Mapping[K, Mapping[str, Any]]) -> dict[K, dict[str, Any]]:
    """`receipt_with_log` for many bodies (a conversation's, an export's) in one read of
    the log: wherever a release is returned, its place in the log is returned with it."""
    ids = [str(body["release"]["id"]) for body in bodies.values() if body.get("release")]
    positions = log_positions(ids) if ids else {}
    read: dict[K, dict[str, Any]] = {}
    for key, body in bodies.items():
        release: dict[str, Any] = body.get("release") or {}
        position = positions.get(str(release["id"])) if release else None
        read[key] = (
            dict(body) if position is None else {**body, "release": {**release, "log": position}}
        )
    return read


def capture_sources_fit(*, user: User, capture: dict, space_id: int) -> str | None:
    """Whether an output capture (run, generation, release: a publication intent's or a
    conversation-derived proposal's) may still carry its text into `space_id` for `user`
    (its author): None when it may, else the typed reason — `sources_unavailable` when
    the captured answer no longer passes this boundary for them (a lost source, a missing
    run or release), `sources_outside_space` when a cited source is in another space."""
    try:
        run = AnswerRun.objects.filter(pk=uuid.UUID(str(capture.get("run_id")))).first()
    except ValueError:
        run = None
    generation = capture.get("generation")
    if run is None or run.user_id != user.pk or not isinstance(generation, int):
        return "sources_unavailable"
    body = sealed_answer_read(user=user, run=run, generation=generation)
    release = (body or {}).get("release") or {}
    if body is None or not release or str(release.get("id")) != str(capture.get("release_id")):
        return "sources_unavailable"
    if not sources_in_space(sources=body["evidence"]["sources"], space_id=space_id):
        return "sources_outside_space"
    return None
