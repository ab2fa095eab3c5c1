"""Reads of knowledge objects, always scoped to what the user may see."""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from guardian.models import UserObjectPermission
from guardian.shortcuts import get_objects_for_user

from core.errors import NotFoundError
from core.inputs import object_id_parse
from core.types import User, UserOrAnonymous
from knowledge.models import (
    Document,
    DocumentOrigin,
    DocumentRevision,
    EmbeddingStatus,
    Erasure,
    Extraction,
    ExtractionStatus,
    KnowledgeProposal,
    Passage,
    Space,
)

ROLE_READER = "reader"
ROLE_CURATOR = "curator"


def spaces_visible_to(*, user: UserOrAnonymous) -> QuerySet[Space]:
    """Spaces the user may read: those where they hold a role (reader or curator).

    Being staff grants nothing here: staff is what opens Django admin, which every curator
    needs. Superusers hold every permission (Django's rule), so they read every space.
    """
    if not user.is_authenticated or not user.is_active:
        return Space.objects.none()
    if user.is_superuser:
        return Space.objects.all()
    return get_objects_for_user(
        user, "knowledge.view_space", klass=Space, accept_global_perms=False
    )


def spaces_curated_by(*, user: UserOrAnonymous) -> QuerySet[Space]:
    """Spaces the user curates (superusers: every space); what admin shows them."""
    if not user.is_authenticated or not user.is_active:
        return Space.objects.none()
    if user.is_superuser:
        return Space.objects.all()
    return get_objects_for_user(
        user, "knowledge.curate_space", klass=Space, accept_global_perms=False
    )


def documents_curated_by(*, user: UserOrAnonymous) -> QuerySet[Document]:
    """Documents of the spaces the user curates. Private files belong to no space, so they
    never appear here, not even for a superuser."""
    return Document.objects.filter(space__in=spaces_curated_by(user=user).values("pk"))


def revisions_curated_by(*, user: UserOrAnonymous) -> QuerySet[DocumentRevision]:
    return DocumentRevision.objects.filter(
        document__in=documents_curated_by(user=user).values("pk")
    )


def erasures_curated_by(*, user: UserOrAnonymous) -> QuerySet[Erasure]:
    return Erasure.objects.filter(document__in=documents_curated_by(user=user).values("pk"))


def extractions_curated_by(*, user: UserOrAnonymous) -> QuerySet[Extraction]:
    return Extraction.objects.filter(
        revision__document__in=documents_curated_by(user=user).values("pk")
    )


def spaces_all() -> QuerySet[Space]:
    """Every space, by name: for operators at the command line, unscoped."""
    return Space.objects.order_by("name")


def space_find(*, name_or_id: str) -> Space | None:
    """A space by exact name, else by id: for operators at the command line, unscoped."""
    space = Space.objects.filter(name=name_or_id).first()
    pk = object_id_parse(name_or_id)
    if space is None and pk:
        space = Space.objects.filter(pk=pk).first()
    return space


def space_get_for_user(*, user: UserOrAnonymous, space_id: object) -> Space:
    """The space if the user may read it; NotFoundError whether missing or hidden."""
    pk = object_id_parse(space_id)
    space = spaces_visible_to(user=user).filter(pk=pk).first() if pk else None
    if space is None:
        raise NotFoundError("Space not found.")
    return space


def space_get_for_curator(*, user: UserOrAnonymous, space_id: object) -> Space:
    """The space if the user curates it (superusers: any); NotFoundError whether it is
    missing, hidden or only read: what only curators may see is not there for others."""
    pk = object_id_parse(space_id)
    space = spaces_curated_by(user=user).filter(pk=pk).first() if pk else None
    if space is None:
        raise NotFoundError("Space not found.")
    return space


def space_role_of(*, user: User, space: Space) -> str | None:
    """The member role of user in space ("curator", "reader") or None."""
    if user.has_perm("knowledge.curate_space", space):
        return ROLE_CURATOR
    if user.has_perm("knowledge.view_space", space):
        return ROLE_READER
    return None


def space_can_manage(*, user: User, space: Space) -> bool:
    """Add documents and datasets, set members: curators of the space (and superusers)."""
    return bool(user.is_active and user.is_superuser) or user.has_perm(
        "knowledge.curate_space", space
    )


def space_can_create(*, user: UserOrAnonymous) -> bool:
    """Create a space (and become its first curator): active staff and superusers, as
    SPEC §3 has it ("staff manage spaces"); a role in a space grants no creation."""
    return bool(user.is_authenticated and user.is_active and (user.is_staff or user.is_superuser))


def space_can_curate(*, user: UserOrAnonymous, space: Space) -> bool:
    """Review proposals: curators of the space only (staff alone is not enough)."""
    return bool(user.is_active and user.is_superuser) or user.has_perm(
        "knowledge.curate_space", space
    )


def space_members(*, space: Space) -> list[dict]:
    """Members with their role, sorted by username: the users holding view_space or
    curate_space on the space itself (not through a group, superusers only where given a
    role). One query, however many members (guardian's get_users_with_perms asks once per
    user)."""
    granted = UserObjectPermission.objects.filter(
        content_type=ContentType.objects.get_for_model(Space),
        object_pk=str(space.pk),
        permission__codename__in=["view_space", "curate_space"],
    ).values_list("user__username", "permission__codename")
    roles: dict[str, str] = {}
    for username, codename in granted:
        if codename == "curate_space":
            roles[username] = ROLE_CURATOR
        else:
            roles.setdefault(username, ROLE_READER)
    return [{"username": username, "role": roles[username]} for username in sorted(roles)]


def documents_visible_to(*, user: UserOrAnonymous) -> QuerySet[Document]:
    """Documents of visible spaces plus the user's own private files."""
    if not user.is_authenticated or not user.is_active:
        return Document.objects.none()
    return Document.objects.filter(
        Q(space__in=spaces_visible_to(user=user).values("pk")) | Q(owner=user)
    )


def documents_listed_for(*, user: UserOrAnonymous) -> QuerySet[Document]:
    """The documents a person's document list shows: those of visible spaces and their own
    private files, never the snapshots outside channels stored for them (outside.snapshots,
    listed on their own)."""
    return documents_visible_to(user=user).filter(origin=DocumentOrigin.UPLOAD)


def documents_of_space(*, user: UserOrAnonymous, space: Space) -> QuerySet[Document]:
    """A visible space's documents, withdrawn ones included, by title, with their
    revisions and extractions (the library page)."""
    return (
        documents_visible_to(user=user)
        .filter(space=space)
        .select_related("current_revision")
        .prefetch_related("revisions__extractions")
        .order_by("title", "pk")
    )


def private_files_of(*, user: UserOrAnonymous) -> QuerySet[Document]:
    """The user's own private files, newest first (nobody else's, superusers included)."""
    if not user.is_authenticated or not user.is_active:
        return Document.objects.none()
    return Document.objects.filter(
        owner=user, space__isnull=True, origin=DocumentOrigin.UPLOAD
    ).order_by("-id")


def document_get_for_user(*, user: UserOrAnonymous, document_id: object) -> Document:
    """The document if the user may read it; NotFoundError whether missing or hidden."""
    pk = object_id_parse(document_id)
    document = documents_visible_to(user=user).filter(pk=pk).first() if pk else None
    if document is None:
        raise NotFoundError("Document not found.")
    return document


def revision_of_document(*, document: Document, revision_id: object) -> DocumentRevision:
    """One revision of a document the caller may read (from `document_get_for_user`);
    NotFoundError when it is not one of that document's."""
    pk = object_id_parse(revision_id)
    revision = document.revisions.filter(pk=pk).first() if pk else None
    if revision is None:
        raise NotFoundError("Revision not found.")
    return revision


def revision_extractions(*, revision_id: int) -> list[Extraction]:
    """Both extractions of a revision, primary first (for operators waiting on them)."""
    return list(Extraction.objects.filter(revision_id=revision_id).order_by("role"))


def document_admitted_text(*, document: Document) -> Extraction | None:
    """The extraction of the document's current revision that passages and quotes are cut
    from (the primary, unless it is damaged and the secondary clean)."""
    if document.current_revision_id is None:
        return None
    return Extraction.objects.filter(
        revision_id=document.current_revision_id,
        serves_passages=True,
        status=ExtractionStatus.ADMITTED,
    ).first()


def proposal_get_for_user(*, user: UserOrAnonymous, proposal_id: object) -> KnowledgeProposal:
    """The proposal if the user may read its space; NotFoundError whether missing or hidden."""
    pk = object_id_parse(proposal_id)
    proposal = proposals_visible_to(user=user).filter(pk=pk).first() if pk else None
    if proposal is None:
        raise NotFoundError("Proposal not found.")
    return proposal


def proposals_visible_to(*, user: UserOrAnonymous) -> QuerySet[KnowledgeProposal]:
    return KnowledgeProposal.objects.filter(
        space__in=spaces_visible_to(user=user).values("pk")
    ).select_related("base_version", "proposed_by")


def extractions_stale(*, now: datetime | None = None) -> QuerySet[Extraction]:
    """Extractions that no worker is going to finish on its own.

    Pending rows whose queue message is older than KOINON_EXTRACT_REQUEUE_AFTER
    (the message was lost, or never sent), and running rows whose heartbeat is
    older than KOINON_EXTRACT_STALE_AFTER (their worker died).
    """
    now = now or timezone.now()
    pending_before = now - timedelta(seconds=settings.KOINON_EXTRACT_REQUEUE_AFTER)
    running_before = now - timedelta(seconds=settings.KOINON_EXTRACT_STALE_AFTER)
    # A pending row's heartbeat comes from the task working on its sibling.
    return Extraction.objects.alias(
        queued=Coalesce(Greatest("queued_at", "heartbeat_at"), "created_at"),
        alive=Coalesce("heartbeat_at", "created_at"),
    ).filter(
        Q(status=ExtractionStatus.PENDING, queued__lt=pending_before)
        | Q(status=ExtractionStatus.RUNNING, alive__lt=running_before)
    )


def extractions_embedding_waiting() -> QuerySet[Extraction]:
    """Admitted extractions with passages that have no vector yet (pending, or the
    provider was unavailable): keyword search finds them, vector search does not."""
    waiting = Passage.objects.filter(extraction=OuterRef("pk")).exclude(
        embedding_status=EmbeddingStatus.EMBEDDED
    )
    return Extraction.objects.filter(Exists(waiting), status=ExtractionStatus.ADMITTED)


def extractions_embedding_stalled(*, now: datetime | None = None) -> QuerySet[Extraction]:
    """Extractions waiting for vectors (above) whose heartbeat is older than
    KOINON_EXTRACT_STALE_AFTER: no worker is embedding them (knowledge.documents.embedding.
    embeddings_resume queues them again; health reports them)."""
    now = now or timezone.now()
    before = now - timedelta(seconds=settings.KOINON_EXTRACT_STALE_AFTER)
    return (
        extractions_embedding_waiting()
        .alias(alive=Coalesce("heartbeat_at", "created_at"))
        .filter(alive__lt=before)
    )


def passages_embedded_by_another_model(*, model_id: str) -> QuerySet[Passage]:
    """Embedded passages whose vector is not the current provider's (retrieval ignores them)."""
    return Passage.objects.filter(embedding_status=EmbeddingStatus.EMBEDDED).exclude(
        embedding_model=model_id
    )


def embeddings_of_another_model_exist(*, model_id: str) -> bool:
    """Whether any passage has a vector of another model: every worker's sweeper asks.

    Two range probes of the partial index on embedding_model (below and above the id), so
    that "none" is known without reading the passage table (`<>` would scan it).
    """
    embedded = Passage.objects.filter(embedding_status=EmbeddingStatus.EMBEDDED)
    return (
        embedded.filter(embedding_model__lt=model_id).exists()
        or embedded.filter(embedding_model__gt=model_id).exists()
    )


def documents_being_indexed() -> int:
    """How many documents are not yet searchable by both channels: an extraction still
    pending or running (no passages yet), or passages waiting for their vectors. Failed
    extractions are not waiting: they never become searchable."""
    extracting = Extraction.objects.filter(
        status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING]
    ).values_list("revision__document_id", flat=True)
    embedding = (
        Passage.objects.filter(embedding_status=EmbeddingStatus.PENDING)
        .values_list("document_id", flat=True)
        .distinct()
    )
    return len(set(extracting) | set(embedding))
