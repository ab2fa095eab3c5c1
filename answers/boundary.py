"""The one boundary every read of a sealed answer passes (runs, event replay, exports,
shares, MCP): the caller may see every source the answer cites, now — or they get the
fixed access-failure text instead of it. Sealed text never outlives the access it was
sealed under."""

import uuid
from collections.abc import Callable

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from answers.models import AnswerRun
from answers.pipeline import texts
from audit.models import StreamEvent
from datasets.models import Dataset
from datasets.selectors import datasets_visible_to
from knowledge.models import Document
from knowledge.selectors import documents_visible_to


def sources_visible(*, user: AbstractBaseUser | AnonymousUser, sources: list[dict]) -> bool:
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


def source_visibility(
    *, user: AbstractBaseUser | AnonymousUser, sources: list[dict]
) -> Callable[[dict], bool]:
    """Whether each of these source references (revisions, snapshots) is visible to the
    user now: at most two statements for any number of them."""
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    seen_documents = set(
        documents_visible_to(user=user).filter(pk__in=documents).values_list("pk", flat=True)
    ) if documents else set()  # fmt: skip
    seen_datasets = set(
        datasets_visible_to(user=user).filter(pk__in=datasets).values_list("pk", flat=True)
    ) if datasets else set()  # fmt: skip

    def visible(source: dict) -> bool:
        if source.get("type") == "revision":
            return source["document_id"] in seen_documents
        if source.get("type") == "snapshot":
            return source["dataset_id"] in seen_datasets
        return True

    return visible


def access_failure_body(body: dict) -> dict:
    """The sealed body's frame with the fixed access-failure text: no prose, citations,
    cards, sources or release claims."""
    language = body.get("answer", {}).get("language", "en")
    return {
        "run_id": body["run_id"],
        "generation": body["generation"],
        "mode": body.get("mode"),
        "answer": {
            "text": texts.explanation("access_failure", language),
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
        "quality": {"completeness": "none", "degraded": True, "issues": ["access_denied"]},
        "release": None,
    }


def sealed_answer_read(
    *, user: AbstractBaseUser | AnonymousUser, run: AnswerRun, generation: int | None = None
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
    if sources and not sources_visible(user=user, sources=sources):
        return access_failure_body(body)
    return body


def sealed_answers_read(
    *, user: AbstractBaseUser | AnonymousUser, runs: list[AnswerRun]
) -> dict[tuple[object, int], dict]:
    """Every sealed generation of `runs`, keyed (run id, generation), each as the caller
    may read it now — the same rule as `sealed_answer_read`, in three queries for a whole
    conversation. A generation with nothing sealed has no key.

    Precondition: the runs came from a permission-scoped selector (they are the caller's).
    """
    events = StreamEvent.objects.filter(run__in=runs, event="completed")
    bodies = {(e.run_id, e.generation): e.data["payload"]["result"] for e in events}
    cited = [s for body in bodies.values() for s in body.get("evidence", {}).get("sources", [])]
    visible = source_visibility(user=user, sources=cited)
    return {
        key: body
        if all(visible(s) for s in body.get("evidence", {}).get("sources", []))
        else access_failure_body(body)
        for key, body in bodies.items()
    }


def capture_sources_fit(*, user: AbstractBaseUser, capture: dict, space_id: int) -> str | None:
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
    if not release or str(release.get("id")) != str(capture.get("release_id")):
        return "sources_unavailable"
    if not sources_in_space(sources=body["evidence"]["sources"], space_id=space_id):
        return "sources_outside_space"
    return None
