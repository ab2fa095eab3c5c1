import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import Max, Q, QuerySet

from answers.boundary import notice_of, sealed_answer_read
from answers.models import AnswerRun, Conversation, ConversationSource
from audit.models import LogEntry, OutputRelease
from audit.services import audit_generations, audit_summary, release_summary
from core.errors import NotFoundError
from core.inputs import object_id_parse
from core.types import User, UserOrAnonymous


def run_get_for_user(*, user: UserOrAnonymous, run_id: object) -> AnswerRun:
    """The user's own run; NotFoundError whether missing or someone else's."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError("Run not found.") from None
    mine = AnswerRun.objects.filter(user=user) if isinstance(user, User) else None
    run = mine.filter(pk=pk).first() if mine is not None else None
    if run is None:
        raise NotFoundError("Run not found.")
    return run


def run_capture_current(capture: dict) -> bool:
    """Whether an output capture (run, generation, release id) is still the run's
    current answer: no newer generation, and that release is the one its body carries.
    A conversation-derived proposal is approvable only while this holds (SPEC §3)."""
    try:
        pk = uuid.UUID(str(capture.get("run_id")))
    except ValueError:
        return False
    run = AnswerRun.objects.filter(pk=pk).first()
    if run is None:
        return False
    newest = run.generations.aggregate(top=Max("number"))["top"] or 0
    if newest != capture.get("generation"):
        return False
    return ((run.response or {}).get("release") or {}).get("id") == capture.get("release_id")


def conversations_of(*, user: UserOrAnonymous) -> QuerySet[Conversation]:
    """The user's own conversations (not those they deleted), newest first."""
    if not isinstance(user, User):  # anonymous: no conversations
        return Conversation.objects.none()
    return Conversation.objects.filter(user_id=user.pk, deleted_at__isnull=True).order_by("-id")


SEARCH_WORDS_MAX = 8


def conversations_listed(
    *, user: UserOrAnonymous, every_origin: bool = False, words: str = ""
) -> QuerySet[Conversation]:
    """The chat's list: the user's conversations started in the chat (`every_origin`: also
    those of the API, MCP, the client and the CLI), those whose title or questions hold
    every one of `words` when given, newest first."""
    found = conversations_of(user=user)
    if not isinstance(user, User):
        return found  # none
    if not every_origin:
        found = found.filter(origin=Conversation.Origin.CHAT)
    if "\x00" in words:  # PostgreSQL cannot hold a NUL: no question has one
        return found.none()
    for word in words.split()[:SEARCH_WORDS_MAX]:
        asked = AnswerRun.objects.filter(user_id=user.pk, question__icontains=word)
        found = found.filter(Q(title__icontains=word) | Q(pk__in=asked.values("conversation_id")))
    return found


def conversation_get_owned(*, user: UserOrAnonymous, conversation_id: object) -> Conversation:
    """The owner rule: the user's own conversation, to ask in, rename, delete, share or
    export; NotFoundError whether missing, deleted or someone else's. The shared-read
    rule is `conversation_get_readable` (conversations.services)."""
    pk = object_id_parse(conversation_id)
    conversation = conversations_of(user=user).filter(pk=pk).first() if pk else None
    if conversation is None:
        raise NotFoundError("Conversation not found.")
    return conversation


def conversation_runs(*, conversation: Conversation) -> QuerySet[AnswerRun]:
    """The conversation's runs in the order they were asked, with their generations."""
    return conversation.runs.order_by("created_at").prefetch_related("generations")


def conversation_selection(*, conversation_id: int) -> tuple[set[int], set[int]]:
    """The conversation's current explicit selection: (space ids, private file ids)."""
    spaces: set[int] = set()
    files: set[int] = set()
    for space_id, document_id in ConversationSource.objects.filter(
        conversation_id=conversation_id
    ).values_list("space_id", "document_id"):
        if space_id is not None:
            spaces.add(space_id)
        else:
            files.add(document_id)
    return spaces, files


def audited_generations(runs: list[AnswerRun]) -> dict[object, list[dict]]:
    """Run id → its audit's generations (steps included: the judge's scores), for runs the
    caller may read (each came through a scoped selector), in one query."""
    audited = audit_generations([run.pk for run in runs])
    return {run.pk: audited[str(run.pk)] for run in runs}


def judge_scores(
    audited: list[dict], number: int, citations: Sequence[Mapping[str, Any]]
) -> dict[int, float]:
    """Citation number → the support judge's score of its quote, read from the audit's
    `judgement` steps of that generation: the sealed body and its receipt carry no score.

    A verdict's score is the best over the parts it served. The same passage judged in
    two spans (another attempt) is told apart by the quote's length; a quote the audit
    cannot tell gets no score, never another quote's."""
    spans: dict[str, dict[tuple[int | None, int | None], float]] = {}
    for entry in audited:
        if entry.get("number") != number:
            continue
        for step in entry.get("steps", []):
            if step.get("step") != "judgement":
                continue
            for verdict in step.get("verdicts", []):
                if not verdict.get("supported"):
                    continue
                untyped = {str(part) for part in verdict.get("answer_type_missing", [])}
                served = [s for p, s in verdict.get("scores", {}).items() if p not in untyped]
                if served:
                    span = (verdict.get("start"), verdict.get("end"))
                    spans.setdefault(verdict["fact_id"], {})[span] = max(served)
    scores = {}
    for citation in citations:
        if citation["kind"] != "quote":
            continue
        found = spans.get(citation["fact_id"], {})
        if len(found) > 1:
            found = {
                (start, end): score
                for (start, end), score in found.items()
                if start is not None and end is not None and end - start == len(citation["quote"])
            }
        if len(found) == 1:
            scores[citation["number"]] = next(iter(found.values()))
    return scores


# Documents whose extracted text keeps the file's lines, so a line range locates a quote.
LINED_KINDS = ("text", "markdown")

# Where each quote stands in the admitted text it was checked against (exactly inside its
# passage when there, else the passage itself, as chat.sources finds it), and the first and
# last line that span covers, counted from the newlines before it; only line numbers leave
# the database, never the text.
_CITATION_LINES = """
SELECT cited.run_id::text, cited.fact_id, cited.quote,
       1 + length(left(e.text, span.s)) - length(replace(left(e.text, span.s), E'\\n', '')),
       1 + length(left(e.text, greatest(span.s, span.t - 1)))
         - length(replace(left(e.text, greatest(span.s, span.t - 1)), E'\\n', ''))
FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS cited(run_id, fact_id, quote)
JOIN answers_candidatefact f ON f.run_id = cited.run_id AND f.fact_id = cited.fact_id
JOIN knowledge_extraction e
  ON e.id = (f.source->>'extraction_id')::bigint AND e.status = 'admitted'
JOIN knowledge_documentrevision r ON r.id = e.revision_id
JOIN knowledge_document d ON d.id = r.document_id AND d.kind = ANY(%s::text[])
CROSS JOIN LATERAL (
  SELECT (f.source->>'char_start')::int AS lo, (f.source->>'char_end')::int AS hi
) AS passage
CROSS JOIN LATERAL (
  SELECT strpos(
    substr(e.text, passage.lo + 1, passage.hi - passage.lo + length(cited.quote)), cited.quote
  ) AS at
) AS found
CROSS JOIN LATERAL (
  SELECT CASE WHEN found.at > 0 THEN passage.lo + found.at - 1 ELSE passage.lo END AS s,
         CASE WHEN found.at > 0 THEN passage.lo + found.at - 1 + length(cited.quote)
              ELSE passage.hi END AS t
) AS span
"""


def citation_lines(
    *, cited: Sequence[tuple[object, str, str]]
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(run id, fact id, quote) → the first and last line of the quote, for each cited (run id,
    fact id, quote) of a plain-text or Markdown document: the lines of the admitted text the
    quote was verified against, as the source view counts them. One query for all.

    Precondition: the citations come from sealed bodies the caller may read now (through
    `sealed_answer_read`); nothing but line numbers is returned."""
    if not cited:
        return {}
    runs, facts, quotes = ([str(c[0]) for c in cited], [c[1] for c in cited], [c[2] for c in cited])
    with connection.cursor() as cursor:
        cursor.execute(_CITATION_LINES, [runs, facts, quotes, list(LINED_KINDS)])
        rows = cursor.fetchall()
    return {(run, fact, quote): (first, last) for run, fact, quote, first, last in rows}


def run_audit(*, run: AnswerRun) -> dict:
    """The audit of a run the caller may read. `output_release` appears for a
    generation only when a release row exists for it: it is read, never inferred."""
    audit = audit_summary(run.pk)
    releases = {
        release.message.generation.number: release
        for release in OutputRelease.objects.filter(run=run).select_related("message__generation")
        if release.message.generation is not None  # selected with the message
    }
    generations = []
    for entry in audit["generations"] if audit else []:
        item = dict(entry)
        item.pop("release_id", None)
        if entry["number"] in releases:
            item["output_release"] = release_summary(releases[entry["number"]])
        generations.append(item)
    return {
        "run_id": str(run.pk),
        "question": run.question,
        "mode": run.mode,
        "policy": run.policy,
        "plan": audit["plan"] if audit else run.plan,
        "memories_used": audit["memories_used"] if audit else [],
        "generations": generations,
    }


def run_release(*, run: AnswerRun, release_id: uuid.UUID | str) -> OutputRelease | None:
    """One release of a run the caller may read (the run came from a scoped selector)."""
    return OutputRelease.objects.filter(run=run, pk=release_id).first()


def release_log_entry_for_user(*, user: UserOrAnonymous, release_id: object) -> LogEntry:
    """The answer log's entry of a release the user may read now: their own run's, through
    the sealed-read boundary (an answer whose source they lost is not theirs to prove).
    NotFoundError whether missing, someone else's or unreadable; `not_integrated` when the
    release is readable but not in the log yet."""
    missing = NotFoundError("Release not found.")
    try:
        pk = uuid.UUID(str(release_id))
    except ValueError:
        raise missing from None
    release = OutputRelease.objects.select_related("generation").filter(pk=pk).first()
    if release is None or release.generation is None:
        raise missing
    try:
        run = run_get_for_user(user=user, run_id=release.run_id)
    except NotFoundError:
        raise missing from None
    body = sealed_answer_read(user=user, run=run, generation=release.generation.number)
    if body is None or notice_of(body) is not None:
        raise missing
    entry = LogEntry.objects.filter(release=release).first()
    if entry is None:
        raise NotFoundError("This release is not in the answer log yet.", code="not_integrated")
    return entry
