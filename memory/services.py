"""Memory entries: created from explicit corrections and from sealed answers, revoked by
their owner (or a curator, for project memory), read by the planner, rechecked before
sealing. Memory steers searches only: what it says is never a candidate, so a remembered
fact still needs fresh reads of its sources to answer anything."""

from copy import copy
from dataclasses import dataclass, replace

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import get_language

from answers.boundary import (
    sealed_answer_read,
    source_visibility,
    sources_in_space,
    sources_visible,
)
from answers.judge.lexical import TermWeights, content_stems, content_words, stem
from answers.models import AnswerRun
from answers.pipeline import texts
from answers.pipeline.vocabulary import MemorySteering, Plan
from core.errors import ConflictError, NotFoundError, UnprocessableError
from core.inputs import object_id_parse
from core.types import User
from datasets.models import Dataset
from knowledge.curation import CurationForbidden
from knowledge.frequencies import document_frequencies
from knowledge.models import Document, Space
from knowledge.scope import AccessScope
from knowledge.selectors import space_can_curate, spaces_curated_by, spaces_visible_to
from memory.models import MemoryEntry, ProjectMemory

MAX_TEXT_CHARS = 2000
WORDS_PER_ENTRY = 8  # words an entry may add to a search
ENTRIES_PER_PLAN = 5


# --- reading -------------------------------------------------------------------------


def project_memory_enabled(*, space: Space) -> bool:
    return ProjectMemory.objects.filter(space=space, enabled=True).exists()


def memory_entries_visible_to(*, user: User) -> QuerySet[MemoryEntry]:
    """The user's own entries, and the project entries of spaces they curate."""
    curated = spaces_curated_by(user=user).values("pk")
    return MemoryEntry.objects.filter(
        Q(user_id=user.pk) | Q(scope=MemoryEntry.Scope.PROJECT, space_id__in=curated)
    ).order_by("-id")


def memory_entry_get_for_user(*, user: User, entry_id: object) -> MemoryEntry:
    """An entry the user may manage; NotFoundError whether missing or not theirs."""
    pk = object_id_parse(entry_id)
    entry = memory_entries_visible_to(user=user).filter(pk=pk).first() if pk else None
    if entry is None:
        raise NotFoundError("Memory entry not found.")
    return entry


def memory_entries_shown(*, user: User, entries: list[MemoryEntry]) -> list[MemoryEntry]:
    """Entries as the user may read them now: a fact whose sources are no longer all
    visible to the user shows the access-failure text and no sources (its text is a sealed
    quote; issue 27). Unsaved copies; at most two statements for any number of entries."""
    visible = source_visibility(user=user, sources=[s for e in entries for s in e.sources])
    shown = []
    for entry in entries:
        if not all(map(visible, entry.sources)):
            entry = copy(entry)
            entry.text = texts.explanation("access_failure", get_language() or "en")
            entry.sources = []
        shown.append(entry)
    return shown


# An entry is about a part of the question when they share at least MIN_SHARED_STEMS
# content stems and those carry at least RELEVANCE_THRESHOLD of the part's IDF weight in
# the run's corpus. Measured on the labelled pairs of memory/relevance_set.py by
# bench/memory_relevance.py (docs/memory.md): one shared stem ("platform") is never enough.
MIN_SHARED_STEMS = 2
RELEVANCE_THRESHOLD = 0.5


@dataclass(frozen=True)
class Relevance:
    score: float  # the IDF-weighted share of the part's stems the entry shares
    shared: tuple[str, ...]  # the stems they share

    @property
    def relevant(self) -> bool:
        return len(self.shared) >= MIN_SHARED_STEMS and self.score >= RELEVANCE_THRESHOLD


def memory_relevance(part: str, text: str, weights: TermWeights) -> Relevance:
    """How much of a part of the question an entry's text is about."""
    wanted = content_stems(part)
    have = set(content_stems(text))
    shared = tuple(stem for stem in wanted if stem in have)
    total = sum(weights.weight(stem) for stem in wanted)
    score = sum(weights.weight(stem) for stem in shared) / total if total else 0.0
    return Relevance(round(score, 4), shared)


def _sources_inside(sources: list[dict], scope: AccessScope) -> bool:
    """Every source of a remembered answer is inside what the run may search."""
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    for space_id, pk in Document.objects.filter(pk__in=documents).values_list("space_id", "pk"):
        if space_id not in scope.space_ids and pk not in scope.file_ids:
            return False
        documents.discard(pk)
    in_scope = Dataset.objects.filter(pk__in=datasets, space_id__in=scope.space_ids).count()
    return not documents and in_scope == len(datasets)


def _scope_fits(entry: MemoryEntry, scope: AccessScope) -> str | None:
    """Why the entry's scope fits the run's (None: it does not)."""
    if entry.space_id is not None and entry.space_id not in scope.space_ids:
        return None  # made for a space this run does not search
    if entry.kind == MemoryEntry.Kind.FACT:
        if not entry.sources or not _sources_inside(entry.sources, scope):
            return None
        return "its sources are inside the run's scope"
    if entry.space_id is not None:
        return "made in a space the run searches"
    return (
        "personal, for every space, and the run searches every space"
        if (scope.every_space)
        else None
    )


def _weights(scope: AccessScope, texts: list[str]) -> TermWeights:
    words = [word for text in texts for word in content_words(text)]
    frequencies, documents = document_frequencies(scope=scope, words=words)
    by_stem: dict[str, int] = {}
    for word, count in frequencies.items():
        by_stem[stem(word)] = max(by_stem.get(stem(word), 0), count)
    return TermWeights(by_stem, documents)


@dataclass(frozen=True)
class Steering:
    """An entry that steers some parts of a plan, and why."""

    entry: MemoryEntry
    parts: tuple[int, ...]
    scope: str  # why its scope fits the run's
    relevance: tuple[Relevance, ...]  # per steered part


def memories_for_plan(*, run: AnswerRun, plan: Plan, scope: AccessScope) -> list[Steering]:
    """The active entries that may steer the run's plan, and the parts each is about.

    An entry counts when (a) its scope fits the run's — a fact only if every source it came
    from is inside the spaces and files the run may search, a correction only for the space
    it was made in or, personal and made for no space, when the run searches every space —
    and (b) it is about a part of the question (`memory_relevance`). The asker's personal
    entries and the project entries of the spaces in scope whose project memory is on;
    none for a run with an explicit evidence policy (SPEC §5: no implicit memory lookups)."""
    if run.explicit_policy:
        return []
    enabled = ProjectMemory.objects.filter(
        enabled=True, space_id__in=sorted(scope.space_ids)
    ).values("space_id")
    entries = list(
        MemoryEntry.objects.filter(revoked_at__isnull=True)
        .filter(
            Q(scope=MemoryEntry.Scope.PERSONAL, user_id=run.user_id)
            | Q(scope=MemoryEntry.Scope.PROJECT, space_id__in=enabled)
        )
        .order_by("-id")
    )
    if not entries:
        return []  # one statement for the common case: no memory
    parts = plan.searches or [plan.standalone]
    weights: TermWeights | None = None
    steering = []
    for entry in entries:
        why = _scope_fits(entry, scope)
        if why is None:
            continue
        weights = weights or _weights(scope, parts)
        judged = [
            (part, memory_relevance(text, entry.text, weights)) for part, text in enumerate(parts)
        ]
        about = [(part, relevance) for part, relevance in judged if relevance.relevant]
        # Facts only where their sources are still visible: a lost source is forgotten.
        if not about or (
            entry.sources and not sources_visible(user=run.user, sources=entry.sources)
        ):
            continue
        steering.append(
            Steering(entry, tuple(p for p, _ in about), why, tuple(r for _, r in about))
        )
        if len(steering) == ENTRIES_PER_PLAN:
            break
    return steering


def plan_steer(*, run: AnswerRun, plan: Plan, scope: AccessScope) -> Plan:
    """The run's plan with the searches its memory steers (the answer path's port
    answers.pipeline.hooks.plan_steer)."""
    return plan_with_memory(plan, memories_for_plan(run=run, plan=plan, scope=scope))


def plan_with_memory(plan: Plan, steering: list[Steering]) -> Plan:
    """Steer the searches of the parts each entry is about with its words (a correction's
    "accounting policy" joins the search for "how long are invoices retained"). The parts
    stay the question's own words, and what is judged; memory adds words to search with,
    never an answer."""
    if not steering:
        return plan
    used: list[MemorySteering] = []
    for item in steering:
        words = list(dict.fromkeys(content_words(item.entry.text)))[:WORDS_PER_ENTRY]
        used.append(
            {
                "id": item.entry.pk,
                "kind": item.entry.kind,
                "scope": item.entry.scope,
                "parts": list(item.parts),
                "words": words,
                "why": {
                    "scope": item.scope,
                    "shared": sorted({s for r in item.relevance for s in r.shared}),
                    "relevance": max(r.score for r in item.relevance),
                },
            }
        )
    return replace(plan, memory=used)


def memory_recheck(*, run: AnswerRun, user: User, scope: AccessScope) -> str | None:
    """Before sealing: every entry the plan used is still valid (not revoked, its project
    memory still on and its space still visible — in `scope`, the recheck's fresh one —, a
    fact's sources still visible)."""
    used = [item["id"] for item in run.plan.get("memory", [])]
    if not used:
        return None
    entries = {e.pk: e for e in MemoryEntry.objects.filter(pk__in=used, revoked_at__isnull=True)}
    if set(entries) != set(used):
        return "access_denied"
    for entry in entries.values():
        if entry.scope == MemoryEntry.Scope.PERSONAL and (
            entry.user_id != user.pk
            or (entry.space_id is not None and entry.space_id not in scope.space_ids)
        ):
            return "access_denied"
        if entry.scope == MemoryEntry.Scope.PROJECT and not (
            entry.space_id in scope.space_ids
            and ProjectMemory.objects.filter(space_id=entry.space_id, enabled=True).exists()
        ):
            return "access_denied"
        if entry.sources and not sources_visible(user=user, sources=entry.sources):
            return "access_denied"
    return None


# --- writing -------------------------------------------------------------------------


def _scope_space(*, user: User, scope: str, space_id: int | None) -> Space | None:
    """The space an entry is for: project memory needs one (with project memory on); a
    personal entry may name one (it then steers only searches of that space)."""
    if scope == MemoryEntry.Scope.PERSONAL:
        if space_id is None:
            return None
        space = spaces_visible_to(user=user).filter(pk=space_id).first()
        if space is None:
            raise NotFoundError("Space not found.")
        return space
    if space_id is None:
        raise UnprocessableError(
            "Project memory needs a space.",
            code="invalid",
            fields={"space_id": "Required for project memory."},
        )
    space = spaces_visible_to(user=user).filter(pk=space_id).first()
    if space is None:
        raise NotFoundError("Space not found.")
    if not project_memory_enabled(space=space):
        raise ConflictError(
            "Project memory is off for this space; a curator can turn it on.",
            code="project_memory_off",
        )
    return space


def correction_create(
    *, user: User, text: str, scope: str, space_id: int | None = None
) -> MemoryEntry:
    """An explicit correction the user gives: it steers the planner from the next question
    on. Its text is the user's own words, kept as data."""
    text = " ".join(text.split())
    if not content_words(text):
        raise UnprocessableError(
            "The correction has no words to search with.", code="no_text", fields={"text": "Empty."}
        )
    if len(text) > MAX_TEXT_CHARS:
        limit = f"At most {MAX_TEXT_CHARS} characters."
        raise UnprocessableError(
            "The correction is too long.", code="too_large", fields={"text": limit}
        )
    space = _scope_space(user=user, scope=scope, space_id=space_id)
    return MemoryEntry.objects.create(
        user=user,
        scope=scope,
        space=space,
        text=text,
        kind=MemoryEntry.Kind.CORRECTION,
        origin={"type": "correction"},
    )


def fact_remember(
    *, user: User, run: AnswerRun, scope: str, space_id: int | None = None
) -> MemoryEntry:
    """Remember what a sealed answer quoted, with its release and sources. Precondition:
    `run` came from the user's selector. Only a sealed answer that still passes the
    sealed-read boundary qualifies; a refusal, an unsealed or an inaccessible answer does
    not (409 `not_sealed`)."""
    body = sealed_answer_read(user=user, run=run)
    release = (body or {}).get("release") or {}
    if body is None or release.get("kind") != "answer":
        raise ConflictError("Only a sealed answer can be remembered.", code="not_sealed")
    space = _scope_space(user=user, scope=scope, space_id=space_id)
    sources = body["evidence"]["sources"]
    if space is not None and not sources_in_space(sources=sources, space_id=space.pk):
        raise UnprocessableError(
            "An entry for a space keeps only answers whose sources are all in that space.",
            code="sources_outside_space",
            fields={"space_id": "Sources are elsewhere."},
        )
    lines = [c["quote"] for c in body["answer"]["citations"] if c.get("kind") == "quote"]
    lines += [
        f"{c['label']}: {c['value']}"
        for c in body["answer"]["citations"]
        if c.get("kind") == "value"
    ]
    origin = {
        "type": "release",
        "run_id": str(run.pk),
        "generation": body["generation"],
        "release_id": release["id"],
        "text_sha256": release["text_sha256"],
    }
    return MemoryEntry.objects.create(
        user=user,
        scope=scope,
        space=space,
        sources=sources,
        kind=MemoryEntry.Kind.FACT,
        text="\n".join(lines),
        origin=origin,
    )


@transaction.atomic
def memory_revoke(*, user: User, entry: MemoryEntry) -> MemoryEntry:
    """Revoke (precondition: `entry` came from `memory_entry_get_for_user`). Idempotent;
    a revoked entry is never used again and fails the recheck of a run that used it."""
    entry = MemoryEntry.objects.select_for_update().get(pk=entry.pk)
    if entry.revoked_at is None:
        entry.revoked_at = timezone.now()
        entry.revoked_by = user
        entry.save(update_fields=["revoked_at", "revoked_by"])
    return entry


def project_memory_set(*, user: User, space: Space, enabled: bool) -> ProjectMemory:
    """Turn a space's project memory on or off. Precondition: the space is visible to the
    user (selector); only its curators may change it (403 otherwise)."""
    if not space_can_curate(user=user, space=space):
        raise CurationForbidden("Only curators of this space turn its project memory on or off.")
    setting, _ = ProjectMemory.objects.update_or_create(
        space=space, defaults={"enabled": enabled, "changed_by": user}
    )
    return setting
