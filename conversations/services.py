"""Conversations as people read them, export them and share them (SPEC §8), and
publication intents (SPEC §3).

Every assistant message leaves through `message_view`: a sealed answer of the run's
current generation passes the sealed-read boundary (`answers.boundary`) for whoever
reads it now; anything else — prose that was never sealed, a generation a retry
replaced — shows the localized regeneration notice instead, never its text.
"""

import html
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from answers.boundary import (
    NOTICE_ISSUES,
    bodies_with_log,
    capture_sources_fit,
    notice_of,
    sealed_answer_read,
    sealed_answers_read,
    sources_in_space,
)
from answers.models import AnswerRun, Conversation, Message
from answers.pipeline import texts
from answers.selectors import run_capture_current
from audit.log import (
    LogVerification,
    log_export_proofs,
    log_export_unverified,
    log_export_verify,
)
from audit.models import OutputRelease
from audit.receipts import body_hashes, canonical_json, sha256_hex
from conversations.models import ConversationShare, PublicationIntent
from core.errors import ConflictError, NotFoundError, UnprocessableError
from core.inputs import object_id_parse, text_is_storable
from core.types import User
from knowledge.curation import proposal_create
from knowledge.models import Erasure, KnowledgeProposal, ProposalOrigin
from knowledge.selectors import spaces_visible_to

EXPORT_FORMAT = "koinon-conversation-export"
EXPORT_VERSION = 1


# --- selectors -----------------------------------------------------------------------


def conversations_visible_to(*, user: User) -> QuerySet[Conversation]:
    """The user's own conversations and those shared with them (read-only)."""
    if not user.is_authenticated or not user.is_active:
        return Conversation.objects.none()
    shared = ConversationShare.objects.filter(recipient_id=user.pk).values("conversation_id")
    return Conversation.objects.filter(
        Q(user_id=user.pk) | Q(pk__in=shared), deleted_at__isnull=True
    ).order_by("-id")


def conversation_get_readable(*, user: User, conversation_id: object) -> Conversation:
    """The shared-read rule: a conversation the user may read, their own or one shared
    with them (read-only); NotFoundError whether missing, deleted, someone else's or not
    shared with them. What only the owner may do goes through the owner rule,
    `answers.selectors.conversation_get_owned`."""
    pk = object_id_parse(conversation_id)
    found = conversations_visible_to(user=user).filter(pk=pk).first() if pk else None
    if found is None:
        raise NotFoundError("Conversation not found.")
    return found


def run_get_for_reader(*, user: User, run_id: object) -> AnswerRun:
    """A run of a conversation the user may read: their own, or one shared with them
    (read-only: its sealed answers still pass the boundary for this reader). NotFoundError
    whether missing, someone else's, deleted or not shared."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError("Run not found.") from None
    visible = conversations_visible_to(user=user).values("pk")
    run = AnswerRun.objects.filter(pk=pk, conversation_id__in=visible).first()
    if run is None:
        raise NotFoundError("Run not found.")
    return run


# --- reading messages ----------------------------------------------------------------


def message_view(
    *, message: Message, released: set[int], current: dict, bodies: dict, language: str
) -> dict:
    """One message as its reader may read it now. `released`: the ids of messages with a
    release; `current`: per run, its newest released generation; `bodies`: the sealed
    bodies through the boundary for this reader (`sealed_answers_read`)."""
    if message.role == Message.Role.USER:
        return {
            "id": message.pk,
            "role": "user",
            "text": message.text,
            "run_id": str(message.run_id) if message.run_id else None,
            "created_at": message.created_at.isoformat(),
        }
    generation = message.generation.number if message.generation is not None else None
    view = {
        "id": message.pk,
        "role": "assistant",
        "run_id": str(message.run_id) if message.run_id else None,
        "generation": generation,
        "created_at": message.created_at.isoformat(),
    }
    newest = current.get(message.run_id) or 0
    sealed = message.pk in released and generation is not None and newest == generation
    if not sealed:
        notice = "superseded" if newest > (generation or 0) else "unsealed"
        return {**view, "state": notice, "text": texts.regeneration_notice(language), "body": None}
    body = bodies[(message.run_id, generation)]
    state = notice_of(body) or "sealed"
    return {**view, "state": state, "text": body["answer"]["text"], "body": body}


def conversation_messages(*, user: User, conversation: Conversation) -> list[dict]:
    """The messages in order, each as `user` may read it now (a sealed body with its
    release's place in the answer log once integrated), in a fixed number of queries.
    Precondition: the conversation came from `conversation_get_readable`."""
    releases = OutputRelease.objects.filter(run__conversation=conversation).values_list(
        "message_id", "run_id", "message__generation__number"
    )
    released: set[int] = set()
    current: dict[uuid.UUID, int] = {}
    for message_id, run_id, number in releases:
        released.add(message_id)
        current[run_id] = max(current.get(run_id, 0), number or 0)
    # Each release with its place in the answer log, as GET /v1/runs/<id> returns it.
    bodies = bodies_with_log(sealed_answers_read(user=user, runs=list(conversation.runs.all())))
    language = conversation.language or settings.KOINON_RESPONSE_LANGUAGE
    messages = conversation.messages.select_related("generation").order_by("id")
    return [
        message_view(
            message=m, released=released, current=current, bodies=bodies, language=language
        )
        for m in messages
    ]


def conversation_create(
    *, user: User, title: str, language: str = "", origin: str = Conversation.Origin.API
) -> Conversation:
    if language and language not in texts.LANGUAGES:
        known = ", ".join(texts.LANGUAGES)
        raise UnprocessableError(
            "Unknown language.", code="invalid", fields={"language": f"One of {known}."}
        )
    return Conversation.objects.create(
        user=user, title=title.strip()[:200], language=language, origin=origin
    )


TITLE_MAX = 200


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    """A new title (trimmed; 1–200 characters, no control characters). Precondition: the
    owner's conversation (`conversation_get_owned`)."""
    title = title.strip() if isinstance(title, str) else ""
    if (
        not title
        or len(title) > TITLE_MAX
        or not text_is_storable(title)
        or any(ord(c) < 32 for c in title)
    ):
        message = f"A title of 1 to {TITLE_MAX} characters on one line."
        raise UnprocessableError(message, code="invalid", fields={"title": message})
    conversation.title = title
    conversation.save(update_fields=["title"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Gone for its owner and whoever it was shared with: from every list and lookup, its
    shares revoked. Its runs, releases, events and audits stay (sealed records); the owner
    still reads each run and its receipt by id through the API. Precondition: the owner's
    conversation (`conversation_get_owned`)."""
    with transaction.atomic():
        conversation.shares.all().delete()
        conversation.deleted_at = timezone.now()
        conversation.save(update_fields=["deleted_at"])


# --- exports -------------------------------------------------------------------------


def conversation_export(*, user: User, conversation: Conversation) -> dict:
    """The conversation as it may leave now: the output check is repeated at this
    transfer boundary (only sealed answers, each with its release and hashes; unsealed
    prose as the notice). Precondition: the user's own conversation (selector)."""
    messages = conversation_messages(user=user, conversation=conversation)
    export = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": timezone.now().isoformat(),
        "conversation": {
            "id": conversation.pk,
            "title": conversation.title,
            "language": conversation.language,
            "created_at": conversation.created_at.isoformat(),
        },
        "messages": messages,
    }
    # Beside the sealed bodies, never in them: the answer log's latest checkpoint and the
    # inclusion proof of each sealed release it covers (docs/releases.md).
    log = log_export_proofs(_sealed_release_ids(messages))
    if log is not None:
        export["log"] = log
    return export


def _sealed_release_ids(messages: list) -> list[str]:
    return [
        str(m["body"]["release"]["id"])
        for m in messages
        if isinstance(m, dict)
        and m.get("state") == "sealed"
        and isinstance(m.get("body"), dict)
        and isinstance(m["body"].get("release"), dict)
        and "id" in m["body"]["release"]
    ]


# A Markdown link's target other than http(s) (`[x](javascript:…)`, `[x]: data:…`): its
# bracket or parenthesis is escaped, so a viewer shows the characters, not a link.
_INLINE_TARGET = re.compile(r"\]\((?!\s*https?://)", re.IGNORECASE)
_REFERENCE_TARGET = re.compile(
    r"^( {0,3})\[([^\]\n]*)\]:(?!\s*https?://)", re.IGNORECASE | re.MULTILINE
)


def _inert(text: str) -> str:
    """Text of questions, answers and documents as Markdown shows it: `<`, `>` and `&` as
    entities, so no raw HTML of theirs is ever rendered (issue 27); link targets other than
    http(s) escaped, so no `javascript:` link either (issue 48, item 9)."""
    text = html.escape(text, quote=False)
    text = _INLINE_TARGET.sub(r"]\\(", text)
    return _REFERENCE_TARGET.sub(r"\1\\[\2]:", text)


def export_markdown(export: dict) -> str:
    """The export for people: the same messages, citations as a list under each answer."""
    lines = [f"# {_inert(export['conversation']['title'] or 'Conversation')}", ""]
    for message in export["messages"]:
        if message["role"] == "user":
            lines += [f"**Question:** {_inert(message['text'])}", ""]
            continue
        lines += [_inert(message["text"]), ""]
        body = message.get("body") or {}
        for index, citation in enumerate(body.get("answer", {}).get("citations", []), 1):
            where = citation.get("title") or citation.get("label") or ""
            lines.append(f"{index}. {_inert(where)}")
        release = body.get("release")
        if release:
            lines += ["", f"Release `{release['id']}`, text SHA-256 `{release['text_sha256']}`"]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


@dataclass(frozen=True)
class ExportVerification:
    """What `export_verify` found: `problems`, one line each (none: the export is what this
    server let leave), and only what it verified — `sealed`, how many sealed answers match
    their stored releases, and `log`, what the export's log part proved. A report states
    these figures, never the file's own (issue 48, item 7)."""

    problems: list[str]
    sealed: int = 0
    log: LogVerification = field(default_factory=lambda: LogVerification(problems=[]))


def export_verify(export: object) -> ExportVerification:
    """Check an export against the store. Never trusts the file — every value is checked
    for its type before use — and verifies, per SPEC §8 and issues 27 and 33:

    - the conversation exists here and its title is the stored one;
    - the messages are this conversation's, in the stored order, none missing (up to
      `exported_at`: later questions may follow) and none added;
    - every question is the stored text of its message;
    - every answer is of the run and generation stored for its message; a sealed one
      carries that message's own release, whose hashes recompute from the body; any
      other carries exactly the fixed text its state stands for, and only the state the
      store allows (a release is never relabelled `superseded` or `unsealed`);
    - its log part, when it carries one, against the log's key and the stored releases
      (audit.log.log_export_verify); without one, how many of its releases the log holds.
    """
    if not isinstance(export, dict) or export.get("format") != EXPORT_FORMAT:
        return ExportVerification(problems=["not a koinon conversation export"])
    about, messages = export.get("conversation"), export.get("messages")
    if not isinstance(about, dict) or not isinstance(messages, list):
        return ExportVerification(
            problems=["not a koinon conversation export: no conversation or message list"]
        )
    conversation_id = object_id_parse(about.get("id"))
    conversation = (
        Conversation.objects.filter(pk=conversation_id).first() if conversation_id else None
    )
    if conversation is None:
        return ExportVerification(problems=[f"conversation {about.get('id')!r} is not stored here"])
    problems: list[str] = []
    if about.get("title") != conversation.title:
        problems.append("the conversation title is not the stored one")
    stored = {m.pk: m for m in conversation.messages.select_related("generation")}
    releases = {
        r.message_id: r
        for r in OutputRelease.objects.filter(run__conversation=conversation).select_related(
            "message__generation"
        )
    }
    newest: dict[object, int] = {}
    for release in releases.values():
        release_generation = release.message.generation
        number = release_generation.number if release_generation is not None else 0
        newest[release.run_id] = max(newest.get(release.run_id, 0), number)
    language = conversation.language or settings.KOINON_RESPONSE_LANGUAGE
    seen: list[int] = []
    for index, message in enumerate(messages):
        where = f"message {index + 1}"
        pk = message.get("id") if isinstance(message, dict) else None
        own = stored.get(pk) if type(pk) is int else None
        if own is None or own.pk in seen:
            problems.append(f"{where}: not a message of this conversation")
            continue
        seen.append(own.pk)
        problems += [
            f"{where}: {p}"
            for p in _message_problems(message, own, releases.get(own.pk), newest, language)
        ]
    if seen != sorted(seen):
        problems.append("the messages are not in the stored order")
    until = _instant(export.get("exported_at"))
    for pk, own in sorted(stored.items()):
        if pk not in seen and (until is None or own.created_at <= until):
            problems.append(f"message {pk} ({own.role}) is missing from the export")
    claimed = set(_sealed_release_ids(messages))
    exported = {str(r.pk): r for r in releases.values() if str(r.pk) in claimed}
    log = (
        log_export_verify(export["log"], exported)
        if "log" in export
        else log_export_unverified(exported)
    )
    return ExportVerification(problems=problems + log.problems, sealed=len(exported), log=log)


def _message_problems(
    message: dict, own: Message, release: OutputRelease | None, newest: dict, language: str
) -> list[str]:
    run_id = str(own.run_id) if own.run_id else None
    if message.get("role") != own.role or message.get("run_id") != run_id:
        return ["its role or run is not the stored one"]
    if own.role == Message.Role.USER:
        return [] if message.get("text") == own.text else ["the question is not the stored one"]
    generation = own.generation.number if own.generation is not None else None
    if message.get("generation") != generation:
        return ["its generation is not the stored one"]
    state, text, body = message.get("state"), message.get("text"), message.get("body")
    if state in ("superseded", "unsealed"):
        allowed = (
            "unsealed"
            if release is None
            else ("superseded" if newest.get(own.run_id, 0) > (generation or 0) else None)
        )
        if state != allowed:
            return [f"it is marked {state}, but the store says otherwise"]
        if text != texts.regeneration_notice(language) or body is not None:
            return [f"a {state} message must carry exactly the fixed notice"]
        return []
    if state not in ("sealed", *NOTICE_ISSUES) or not isinstance(body, dict):
        return ["no sealed body to verify"]
    if release is None:
        return ["it claims a release, but this message has none"]
    answer = body.get("answer")
    if not isinstance(answer, dict) or text != answer.get("text"):
        return ["the message text differs from its sealed body"]
    if state in NOTICE_ISSUES:
        fixed = _notice_text(state, answer.get("language") or language, release)
        if body.get("release") is not None or text != fixed:
            return [f"a {state.replace('_', ' ')} notice must carry exactly the fixed text"]
        return []
    return _release_problems(body, release)


def _notice_text(state: str, language: str, release: OutputRelease) -> str | None:
    """The one text a notice of that kind may carry for this release: for an erasure,
    dated with the earliest erasure of a revision the release cited (None if none was)."""
    if state != "source_erased":
        return texts.explanation(state, language)
    revisions = [ref.get("id") for ref in release.source_refs if ref.get("type") == "revision"]
    first = Erasure.objects.filter(revision_id__in=revisions).order_by("erased_at").first()
    return texts.erased_notice(language, first.erased_at.astimezone(UTC).date()) if first else None


def _release_problems(body: dict, release: OutputRelease) -> list[str]:
    claimed = body.get("release")
    if not isinstance(claimed, dict) or str(claimed.get("id")) != str(release.pk):
        return ["its release is not the one stored for this message"]
    if str(body.get("run_id")) != str(release.run_id):
        return ["its body belongs to another run"]
    try:
        computed = body_hashes(body, policy_version=release.policy_version)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
        return ["its body cannot be hashed"]
    problems = []
    for name, value in computed.items():
        if getattr(release, name) != value:
            problems.append(f"{name} does not match release {release.pk}")
        if claimed.get(name) != getattr(release, name):
            problems.append(f"the export's {name} is not the stored one")
    return problems


def _instant(value: object) -> datetime | None:
    try:
        return parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# --- shares --------------------------------------------------------------------------


def share_create(*, user: User, conversation: Conversation, username: str) -> ConversationShare:
    """Share read-only with a named, active user. Precondition: the user's own
    conversation (selector). An unknown user is 404 like any missing thing."""
    recipient = (
        get_user_model().objects.filter(username=username, is_active=True).first()
        if text_is_storable(username)
        else None
    )
    if recipient is None or recipient.pk == user.pk:
        raise NotFoundError("User not found.")
    try:
        with transaction.atomic():
            return ConversationShare.objects.create(
                conversation=conversation, recipient=recipient, created_by=user
            )
    except IntegrityError:
        raise ConflictError("Already shared with this user.", code="already_shared") from None


def share_delete(*, conversation: Conversation, username: str) -> None:
    """Remove a share; NotFoundError for a name no share has (also for a name no user can
    have, such as one with a NUL byte: PostgreSQL cannot even compare it)."""
    if not text_is_storable(username):
        raise NotFoundError("Share not found.")
    deleted, _ = ConversationShare.objects.filter(
        conversation=conversation, recipient__username=username
    ).delete()
    if not deleted:
        raise NotFoundError("Share not found.")


# --- publication intents ------------------------------------------------------------


def intent_preview(
    *,
    user: User,
    conversation: Conversation,
    run_id: object,
    space_id: int,
    title: str,
) -> PublicationIntent:
    """Capture the run's current sealed answer (release and text hash) as a preview of a
    knowledge proposal. Only server state is used: nothing a client sends becomes the
    text. Precondition: the user's own conversation (selector)."""
    run_pk = _uuid(run_id)
    run = (
        AnswerRun.objects.filter(pk=run_pk, conversation=conversation).first()
        if run_pk is not None
        else None
    )
    space = spaces_visible_to(user=user).filter(pk=space_id).first()
    if run is None:
        raise NotFoundError("Run not found.")
    if space is None:
        raise NotFoundError("Space not found.")
    body = sealed_answer_read(user=user, run=run)
    release = (body or {}).get("release") or {}
    if body is None or release.get("kind") != "answer":
        raise ConflictError("Only a sealed answer can be proposed.", code="not_sealed")
    if not sources_in_space(sources=body["evidence"]["sources"], space_id=space.pk):
        raise UnprocessableError(
            "A proposal for a space may carry only answers whose sources are all in that space.",
            code="sources_outside_space",
            fields={"space_id": "Sources are elsewhere."},
        )
    title = title.strip()[:300] or conversation.title[:300] or run.question[:300]
    return PublicationIntent.objects.create(
        conversation=conversation,
        run=run,
        generation=body["generation"],
        release_id=release["id"],
        text=body["answer"]["text"],
        text_sha256=sha256_hex(body["answer"]["text"].encode()),
        space=space,
        title=title,
        created_by=user,
    )


def intent_get_for_user(*, user: User, intent_id: object) -> PublicationIntent:
    pk = object_id_parse(intent_id)
    intent = PublicationIntent.objects.filter(pk=pk, created_by_id=user.pk).first() if pk else None
    if intent is None:
        raise NotFoundError("Intent not found.")
    return intent


def intent_shown(*, user: User, intent: PublicationIntent) -> dict:
    """The intent as its author may read it now: its captured text only while every
    cited source is still visible to them (the sealed-read boundary), else the fixed
    access-failure text. Precondition: `intent` came from `intent_get_for_user`."""
    shown = {
        field: getattr(intent, field)
        for field in (
            "id",
            "run_id",
            "generation",
            "space_id",
            "title",
            "text",
            "capture",
            "proposal_id",
            "created_at",
        )
    }
    fit = capture_sources_fit(user=user, capture=intent.capture, space_id=intent.space_id)
    if fit == "sources_unavailable":
        language = ((intent.run.response or {}).get("answer") or {}).get("language", "en")
        shown["text"] = texts.explanation("access_failure", language)
    return shown


def _intent_sources_check(*, user: User, capture: dict, space_id: int) -> None:
    reason = capture_sources_fit(user=user, capture=capture, space_id=space_id)
    if reason == "sources_outside_space":
        raise UnprocessableError(
            "A cited source is no longer in the proposal's space.",
            code="sources_outside_space",
            fields={"space_id": "Sources are elsewhere."},
        )
    if reason is not None:
        raise ConflictError(
            "The answer's sources are no longer visible to you; it cannot be proposed.",
            code="sources_unavailable",
        )


@transaction.atomic
def intent_propose(*, user: User, intent: PublicationIntent) -> KnowledgeProposal:
    """Submit the preview as a pending proposal that keeps its exact output capture.
    Refused (409 `capture_stale`) when the run was regenerated since the preview."""
    intent = PublicationIntent.objects.select_for_update().get(pk=intent.pk)
    if intent.proposal_id is not None:
        raise ConflictError("This preview was proposed already.", code="already_proposed")
    if not run_capture_current(intent.capture):
        raise ConflictError(
            "The answer was regenerated since this preview; make a new one.", code="capture_stale"
        )
    if not spaces_visible_to(user=user).filter(pk=intent.space_id).exists():
        raise NotFoundError("Space not found.")
    _intent_sources_check(user=user, capture=intent.capture, space_id=intent.space_id)
    proposal = proposal_create(
        user=user,
        space=intent.space,
        body=intent.text,
        title=intent.title,
        origin=ProposalOrigin.CONVERSATION,
        reason="Proposed from a conversation answer.",
    )
    proposal.capture = {
        **intent.capture,
        "intent_id": intent.pk,
        "body_sha256": sha256_hex(canonical_json(proposal.body)),
    }
    proposal.save(update_fields=["capture"])
    intent.proposal = proposal
    intent.save(update_fields=["proposal"])
    return proposal
