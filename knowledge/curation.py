"""Curated knowledge: proposals, and their review by curators (services).

Nothing here is reachable from an answer: a proposal changes no knowledge until a
curator approves it, and approval is offered only in Django admin.
"""

import hashlib

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from core.errors import ApiError, ConflictError, UnprocessableError
from core.inputs import text_field_parse
from core.ports import Port
from core.queue import task_named
from core.types import User
from knowledge.documents.extraction import document_set_current, passages_create
from knowledge.extraction import Segment, normalise_text
from knowledge.extraction.damage import extraction_damage
from knowledge.models import (
    Document,
    DocumentKind,
    DocumentRevision,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    KnowledgeEntry,
    KnowledgeProposal,
    KnowledgeVersion,
    ProposalOrigin,
    ProposalStatus,
    Space,
)
from knowledge.normalise import normalised_key
from knowledge.selectors import space_can_curate

KNOWLEDGE_EXTRACTOR = "koinon-knowledge"
MAX_BODY_CHARS = 100_000
REVIEW_NOTE_MAX = 10_000


class CurationForbidden(ApiError):
    status_code = 403
    default_code = "permission_denied"
    default_detail = "Only curators of this space review its proposals."


@transaction.atomic
def proposal_create(
    *,
    user: User,
    space: Space,
    body: str,
    title: str = "",
    reason: str = "",
    entry: KnowledgeEntry | None = None,
    origin: str = ProposalOrigin.API,
) -> KnowledgeProposal:
    """Record a pending proposal against the entry's current version.

    Preconditions: user may read `space`, and `entry` (if any) belongs to it.
    A proposal with a title but no entry targets the space's entry of that title
    when there is one, else a new entry.
    """
    text = normalise_text(body)
    if not text:
        raise UnprocessableError(
            "The proposed text is empty.", code="no_text", fields={"body": "Empty."}
        )
    if len(text) > MAX_BODY_CHARS:
        raise UnprocessableError(
            "The proposed text is too long.",
            code="too_large",
            fields={"body": f"At most {MAX_BODY_CHARS} characters."},
        )
    if entry is None:
        title = title.strip()[:300]
        if not title:
            raise UnprocessableError(
                "A new entry needs a title.",
                code="invalid",
                fields={"title": "Required without an entry."},
            )
        entry = KnowledgeEntry.objects.filter(space=space, title=title).first()
    return KnowledgeProposal.objects.create(
        space=space,
        entry=entry,
        base_version=entry.current_version if entry else None,
        title=entry.title if entry else title,
        body=text,
        reason=reason.strip(),
        origin=origin,
        proposed_by=user,
    )


def _locked_pending(proposal_id: int, curator: User) -> KnowledgeProposal:
    proposal = (
        KnowledgeProposal.objects.select_for_update().select_related("space").get(pk=proposal_id)
    )
    if not space_can_curate(user=curator, space=proposal.space):
        raise CurationForbidden()
    if proposal.status != ProposalStatus.PENDING:
        raise ConflictError(f"The proposal is already {proposal.status}.", code="not_pending")
    return proposal


def proposal_approve(*, proposal_id: int, curator: User, note: str = "") -> KnowledgeVersion:
    """Approve: create the entry's next immutable version, atomically.

    Raises CurationForbidden for a non-curator, ConflictError `not_pending`,
    ConflictError `superseded` when the entry moved on since the proposal was made, and
    ConflictError `capture_stale` when a conversation-derived proposal's answer was
    regenerated since its preview, and ConflictError `sources_unavailable` /
    `sources_outside_space` when its author can no longer see a source it cites or a
    source is not in the proposal's space (each way the proposal is then marked
    superseded; that mark is kept).
    """
    with transaction.atomic():
        proposal = _locked_pending(proposal_id, curator)
        entry = (
            proposal.entry
            or KnowledgeEntry.objects.filter(space=proposal.space, title=proposal.title).first()
        )
        if entry is not None:
            entry = KnowledgeEntry.objects.select_for_update().get(pk=entry.pk)
        stale = proposal.capture is not None and not _capture_current(proposal.capture)
        unavailable = (
            None if proposal.capture is None or stale else _capture_sources_unfit(proposal)
        )
        if unavailable:
            # Conversation-derived: its author lost a cited source, or one left the space.
            lost = "The answer's sources are no longer visible to its author."
            _review(proposal, curator, ProposalStatus.SUPERSEDED, note or lost)
            superseded = True
        elif stale:
            # Conversation-derived: the answer it captured was regenerated since.
            _review(
                proposal,
                curator,
                ProposalStatus.SUPERSEDED,
                note or "The conversation was regenerated since the preview.",
            )
            superseded = True
        elif entry is not None and entry.current_version_id != proposal.base_version_id:
            _review(proposal, curator, ProposalStatus.SUPERSEDED, note or "The entry changed.")
            superseded = True
        else:
            superseded = False
            version = _version_create(proposal=proposal, entry=entry, curator=curator)
            proposal.approved_version = version
            _review(proposal, curator, ProposalStatus.APPROVED, note)
    if superseded and unavailable:
        raise ConflictError(
            "The answer this proposal captured cites a source its author can no longer see, "
            "or one outside the proposal's space; it cannot be approved.",
            code=unavailable,
        )
    if superseded and stale:
        raise ConflictError(
            "The answer this proposal captured was regenerated since its preview; make a "
            "new preview.",
            code="capture_stale",
        )
    if superseded:
        raise ConflictError(
            "The entry has a newer version than the one this proposal was made against; "
            "make a new proposal.",
            code="superseded",
        )
    return version


# A proposal captured from an answer is checked by the answers app, which builds on this
# one: it fills these ports in AnswersConfig.ready() (answers.boundary.capture_sources_fit,
# answers.selectors.run_capture_current).
capture_sources_fit: Port = Port("knowledge.capture_sources_fit")
capture_current: Port = Port("knowledge.capture_current")


def _capture_sources_unfit(proposal: KnowledgeProposal) -> str | None:
    return capture_sources_fit.call(
        user=proposal.proposed_by, capture=proposal.capture, space_id=proposal.space_id
    )


def _capture_current(capture: dict) -> bool:
    return capture_current.call(capture)


@transaction.atomic
def proposal_reject(*, proposal_id: int, curator: User, note: str) -> KnowledgeProposal:
    proposal = _locked_pending(proposal_id, curator)
    _review(proposal, curator, ProposalStatus.REJECTED, note)
    return proposal


def _review(proposal: KnowledgeProposal, curator: User, status: str, note: str) -> None:
    proposal.status = status
    proposal.reviewer = curator
    proposal.reviewed_at = timezone.now()
    proposal.review_note = text_field_parse(
        note, field="review_note", limit=REVIEW_NOTE_MAX, required=False
    )
    proposal.save(
        update_fields=["status", "reviewer", "reviewed_at", "review_note", "approved_version"]
    )


def _version_create(
    *, proposal: KnowledgeProposal, entry: KnowledgeEntry | None, curator: User
) -> KnowledgeVersion:
    """Version, backing revision, admitted extractions and passages, in the caller's transaction."""
    if entry is None:
        document = Document.objects.create(
            space=proposal.space,
            title=proposal.title,
            kind=DocumentKind.KNOWLEDGE,
            created_by=curator,
        )
        entry = KnowledgeEntry.objects.create(
            space=proposal.space, title=proposal.title, document=document
        )
    document = Document.objects.select_for_update().get(pk=entry.document_id)
    number = (entry.current_version.number if entry.current_version else 0) + 1
    body = proposal.body
    data = body.encode()
    sha256 = hashlib.sha256(data).hexdigest()
    revision = DocumentRevision(
        document=document,
        number=number,
        sha256=sha256,
        size=len(data),
        filename=f"knowledge-{entry.pk}-v{number}.txt",
        uploaded_by=curator,
    )
    revision.file.save(f"{sha256}.txt", ContentFile(data), save=False)
    revision.save()
    # The approved text is the source itself: both "extractions" are that exact text, and
    # the primary serves passages (the same damage on both leaves nothing cleaner to take).
    now = timezone.now()
    damage = extraction_damage(body)
    extractions = {
        role: Extraction.objects.create(
            revision=revision,
            role=role,
            extractor=KNOWLEDGE_EXTRACTOR,
            extractor_version="1",
            text=body,
            text_sha256=sha256,
            norm_text=normalised_key(body),
            damage=damage,
            serves_passages=role == ExtractionRole.PRIMARY,
            status=ExtractionStatus.ADMITTED,
            progress=30 if role == ExtractionRole.PRIMARY else 100,
            attempts=1,
            finished_at=now,
        )
        for role in ExtractionRole.values
    }
    primary = extractions[ExtractionRole.PRIMARY]
    passages_create(
        extraction=primary,
        revision=revision,
        segments=[Segment(0, len(body), {"knowledge_version": number})],
    )
    version = KnowledgeVersion.objects.create(
        entry=entry,
        number=number,
        body=body,
        body_sha256=sha256,
        revision=revision,
        approved_by=curator,
        approved_at=now,
    )
    entry.current_version = version
    entry.save(update_fields=["current_version"])
    document.title = entry.title
    document.save(update_fields=["title"])
    document_set_current(document=document, revision=revision)
    transaction.on_commit(lambda: task_named("knowledge.embed_extraction").delay(primary.pk))
    return version
