"""Memory entries: created from explicit corrections and from sealed answers, revoked by
their owner (or a curator, for project memory), read by the planner, rechecked before
sealing. Memory steers searches only: what it says is never a candidate, so a remembered
fact still needs fresh reads of its sources to answer anything."""

from dataclasses import replace

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from answers.boundary import sealed_answer_read, sources_visible
from answers.judge.lexical import content_stems, content_words
from answers.models import AnswerRun
from answers.pipeline.planner import Plan
from core.errors import ConflictError, NotFoundError, UnprocessableError
from core.inputs import object_id_parse
from knowledge.models import Document, Space
from knowledge.selectors import space_can_curate, spaces_curated_by, spaces_visible_to
from memory.models import MemoryEntry, ProjectMemory

MAX_TEXT_CHARS = 2000
WORDS_PER_ENTRY = 8  # words an entry may add to a search
ENTRIES_PER_PLAN = 5


# --- reading -------------------------------------------------------------------------


def project_memory_enabled(*, space: Space) -> bool:
    return ProjectMemory.objects.filter(space=space, enabled=True).exists()


def memory_entries_visible_to(*, user: AbstractBaseUser) -> QuerySet[MemoryEntry]:
    """The user's own entries, and the project entries of spaces they curate."""
    curated = spaces_curated_by(user=user).values("pk")
    return MemoryEntry.objects.filter(
        Q(user_id=user.pk) | Q(scope=MemoryEntry.Scope.PROJECT, space_id__in=curated)
    ).order_by("-id")


def memory_entry_get_for_user(*, user: AbstractBaseUser, entry_id: object) -> MemoryEntry:
    """An entry the user may manage; NotFoundError whether missing or not theirs."""
    pk = object_id_parse(entry_id)
    entry = memory_entries_visible_to(user=user).filter(pk=pk).first() if pk else None
    if entry is None:
        raise NotFoundError("Memory entry not found.")
    return entry


def _relevant(entry: MemoryEntry, stems: set[str]) -> bool:
    return bool(stems & set(content_stems(entry.text)))


def memories_for_plan(*, run: AnswerRun) -> list[MemoryEntry]:
    """The active entries that bear on the run's question: the asker's personal entries
    and the project entries of the spaces in scope whose project memory is on. None for
    a run with an explicit evidence policy (SPEC §5: no implicit memory lookups)."""
    if run.explicit_policy:
        return []
    spaces = spaces_visible_to(user=run.user)
    if run.space_ids:
        spaces = spaces.filter(pk__in=run.space_ids)
    enabled = ProjectMemory.objects.filter(enabled=True, space__in=spaces).values("space_id")
    entries = MemoryEntry.objects.filter(revoked_at__isnull=True).filter(
        Q(scope=MemoryEntry.Scope.PERSONAL, user_id=run.user_id)
        | Q(scope=MemoryEntry.Scope.PROJECT, space_id__in=enabled)
    )
    stems = set(content_stems(run.question))
    relevant = [entry for entry in entries.order_by("-id") if _relevant(entry, stems)]
    # Facts only where their sources are still visible: a lost source is forgotten.
    usable = [
        entry for entry in relevant
        if not entry.sources or sources_visible(user=run.user, sources=entry.sources)
    ]  # fmt: skip
    return usable[:ENTRIES_PER_PLAN]


def plan_with_memory(plan: Plan, entries: list[MemoryEntry]) -> Plan:
    """Steer the plan's searches with the entries' words (a correction's "new policy"
    joins the search for "retention period"). The searches stay the parts of the
    question; memory adds words to find them with, never an answer."""
    if not entries:
        return plan
    searches = list(plan.searches)
    for entry in entries:
        words = list(dict.fromkeys(content_words(entry.text)))
        for index, search in enumerate(searches):
            present = set(content_words(search))
            extra = [w for w in words if w not in present][:WORDS_PER_ENTRY]
            if extra:
                searches[index] = f"{search} {' '.join(extra)}"
    used = [{"id": e.pk, "kind": e.kind, "scope": e.scope} for e in entries]
    return replace(plan, searches=searches, rewritten=True, memory=used)


def memory_recheck(*, run: AnswerRun, user: AbstractBaseUser) -> str | None:
    """Before sealing: every entry the plan used is still valid (not revoked, its project
    memory still on and its space still visible, a fact's sources still visible)."""
    used = [item["id"] for item in run.plan.get("memory", [])]
    if not used:
        return None
    entries = {e.pk: e for e in MemoryEntry.objects.filter(pk__in=used, revoked_at__isnull=True)}
    if set(entries) != set(used):
        return "access_denied"
    visible = spaces_visible_to(user=user)
    for entry in entries.values():
        if entry.scope == MemoryEntry.Scope.PERSONAL and entry.user_id != user.pk:
            return "access_denied"
        if entry.scope == MemoryEntry.Scope.PROJECT and not (
            visible.filter(pk=entry.space_id).exists()
            and ProjectMemory.objects.filter(space_id=entry.space_id, enabled=True).exists()
        ):
            return "access_denied"
        if entry.sources and not sources_visible(user=user, sources=entry.sources):
            return "access_denied"
    return None


# --- writing -------------------------------------------------------------------------


def _scope_space(*, user: AbstractBaseUser, scope: str, space_id: int | None) -> Space | None:
    if scope == MemoryEntry.Scope.PERSONAL:
        if space_id is not None:
            raise UnprocessableError("Personal memory has no space.", code="invalid",
                                     fields={"space_id": "Only for project memory."})  # fmt: skip
        return None
    if space_id is None:
        raise UnprocessableError("Project memory needs a space.", code="invalid",
                                 fields={"space_id": "Required for project memory."})  # fmt: skip
    space = spaces_visible_to(user=user).filter(pk=space_id).first()
    if space is None:
        raise NotFoundError("Space not found.")
    if not project_memory_enabled(space=space):
        raise ConflictError("Project memory is off for this space; a curator can turn it on.",
                            code="project_memory_off")  # fmt: skip
    return space


def correction_create(
    *, user: AbstractBaseUser, text: str, scope: str, space_id: int | None = None
) -> MemoryEntry:
    """An explicit correction the user gives: it steers the planner from the next question
    on. Its text is the user's own words, kept as data."""
    text = " ".join(text.split())
    if not content_words(text):
        raise UnprocessableError("The correction has no words to search with.", code="no_text",
                                 fields={"text": "Empty."})  # fmt: skip
    if len(text) > MAX_TEXT_CHARS:
        limit = f"At most {MAX_TEXT_CHARS} characters."
        raise UnprocessableError("The correction is too long.", code="too_large",
                                 fields={"text": limit})  # fmt: skip
    space = _scope_space(user=user, scope=scope, space_id=space_id)
    return MemoryEntry.objects.create(user=user, scope=scope, space=space, text=text,
                                      kind=MemoryEntry.Kind.CORRECTION,
                                      origin={"type": "correction"})  # fmt: skip


def fact_remember(
    *, user: AbstractBaseUser, run: AnswerRun, scope: str, space_id: int | None = None
) -> MemoryEntry:
    """Remember what a sealed answer quoted, with its release and sources. Precondition:
    `run` came from the user's selector. Only a sealed answer that still passes the
    sealed-read boundary qualifies; a refusal, an unsealed or an inaccessible answer does
    not (409 `not_sealed`)."""
    body = sealed_answer_read(user=user, run=run)
    release = (body or {}).get("release") or {}
    if release.get("kind") != "answer":
        raise ConflictError("Only a sealed answer can be remembered.", code="not_sealed")
    space = _scope_space(user=user, scope=scope, space_id=space_id)
    sources = body["evidence"]["sources"]
    if space is not None and not _all_in_space(sources, space):
        raise UnprocessableError(
            "Project memory keeps only answers whose sources are all in that space.",
            code="sources_outside_space", fields={"space_id": "Sources are elsewhere."},
        )  # fmt: skip
    lines = [c["quote"] for c in body["answer"]["citations"] if c.get("kind") == "quote"]
    lines += [f"{c['label']}: {c['value']}" for c in body["answer"]["citations"]
              if c.get("kind") == "value"]  # fmt: skip
    origin = {"type": "release", "run_id": str(run.pk), "generation": body["generation"],
              "release_id": release["id"], "text_sha256": release["text_sha256"]}  # fmt: skip
    return MemoryEntry.objects.create(user=user, scope=scope, space=space, sources=sources,
                                      kind=MemoryEntry.Kind.FACT, text="\n".join(lines),
                                      origin=origin)  # fmt: skip


def _all_in_space(sources: list[dict], space: Space) -> bool:
    documents = {s["document_id"] for s in sources if s.get("type") == "revision"}
    if Document.objects.filter(pk__in=documents, space=space).count() != len(documents):
        return False
    from datasets.models import Dataset

    datasets = {s["dataset_id"] for s in sources if s.get("type") == "snapshot"}
    return Dataset.objects.filter(pk__in=datasets, space=space).count() == len(datasets)


@transaction.atomic
def memory_revoke(*, user: AbstractBaseUser, entry: MemoryEntry) -> MemoryEntry:
    """Revoke (precondition: `entry` came from `memory_entry_get_for_user`). Idempotent;
    a revoked entry is never used again and fails the recheck of a run that used it."""
    entry = MemoryEntry.objects.select_for_update().get(pk=entry.pk)
    if entry.revoked_at is None:
        entry.revoked_at = timezone.now()
        entry.revoked_by = user
        entry.save(update_fields=["revoked_at", "revoked_by"])
    return entry


def project_memory_set(*, user: AbstractBaseUser, space: Space, enabled: bool) -> ProjectMemory:
    """Turn a space's project memory on or off. Precondition: the space is visible to the
    user (selector); only its curators may change it (403 otherwise)."""
    from knowledge.curation import CurationForbidden

    if not space_can_curate(user=user, space=space):
        raise CurationForbidden("Only curators of this space turn its project memory on or off.")
    setting, _ = ProjectMemory.objects.update_or_create(
        space=space, defaults={"enabled": enabled, "changed_by": user}
    )
    return setting
