"""Reads of knowledge objects, always scoped to what the user may see."""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone
from guardian.shortcuts import get_objects_for_user, get_users_with_perms

from core.errors import NotFoundError
from knowledge.models import (
    Document,
    Extraction,
    ExtractionRole,
    ExtractionStatus,
    KnowledgeProposal,
    Space,
)

ROLE_READER = "reader"
ROLE_CURATOR = "curator"


def spaces_visible_to(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Space]:
    """Spaces the user may read. Staff manage every space and so see them all."""
    if not user.is_authenticated or not user.is_active:
        return Space.objects.none()
    if user.is_staff or user.is_superuser:
        return Space.objects.all()
    return get_objects_for_user(
        user, "knowledge.view_space", klass=Space, accept_global_perms=False
    )


def space_get_for_user(*, user: AbstractBaseUser | AnonymousUser, space_id: object) -> Space:
    """The space if the user may read it; NotFoundError whether missing or hidden."""
    try:
        pk = int(str(space_id))
    except ValueError:
        raise NotFoundError("Space not found.") from None
    space = spaces_visible_to(user=user).filter(pk=pk).first()
    if space is None:
        raise NotFoundError("Space not found.")
    return space


def space_role_of(*, user: AbstractBaseUser, space: Space) -> str | None:
    """The member role of user in space ("curator", "reader") or None."""
    if user.has_perm("knowledge.curate_space", space):
        return ROLE_CURATOR
    if user.has_perm("knowledge.view_space", space):
        return ROLE_READER
    return None


def space_can_manage(*, user: AbstractBaseUser, space: Space) -> bool:
    return bool(user.is_staff or user.is_superuser) or user.has_perm(
        "knowledge.curate_space", space
    )


def space_can_curate(*, user: AbstractBaseUser, space: Space) -> bool:
    """Review proposals: curators of the space only (staff alone is not enough)."""
    return bool(user.is_active and user.is_superuser) or user.has_perm(
        "knowledge.curate_space", space
    )


def space_members(*, space: Space) -> list[dict]:
    """Members with their role, sorted by username."""
    members = get_users_with_perms(
        space, attach_perms=True, with_superusers=False, with_group_users=False
    )
    rows = []
    for user, perms in members.items():
        role = ROLE_CURATOR if "curate_space" in perms else ROLE_READER
        if "view_space" in perms or "curate_space" in perms:
            rows.append({"username": user.get_username(), "role": role})
    return sorted(rows, key=lambda row: row["username"])


def documents_visible_to(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Document]:
    """Documents of visible spaces plus the user's own private files."""
    if not user.is_authenticated or not user.is_active:
        return Document.objects.none()
    return Document.objects.filter(
        Q(space__in=spaces_visible_to(user=user).values("pk")) | Q(owner=user)
    )


def document_get_for_user(
    *, user: AbstractBaseUser | AnonymousUser, document_id: object
) -> Document:
    """The document if the user may read it; NotFoundError whether missing or hidden."""
    try:
        pk = int(str(document_id))
    except ValueError:
        raise NotFoundError("Document not found.") from None
    document = documents_visible_to(user=user).filter(pk=pk).first()
    if document is None:
        raise NotFoundError("Document not found.")
    return document


def document_admitted_text(*, document: Document) -> Extraction | None:
    """The admitted primary extraction of the document's current revision."""
    if document.current_revision_id is None:
        return None
    return Extraction.objects.filter(
        revision_id=document.current_revision_id,
        role=ExtractionRole.PRIMARY,
        status=ExtractionStatus.ADMITTED,
    ).first()


def proposals_visible_to(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[KnowledgeProposal]:
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
