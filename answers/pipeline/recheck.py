"""The permission recheck immediately before sealing (SPEC §1.6)."""

import logging

from django.contrib.contenttypes.models import ContentType
from django.db import DatabaseError, connection, transaction
from django.db.models import Model
from guardian.models import GroupObjectPermission, UserObjectPermission

from answers.models import AnswerRun
from answers.pipeline import hooks
from answers.pipeline.validation import SelectedFact
from answers.selectors import conversation_selection
from core.models import ApiKey
from core.types import User
from datasets.models import Dataset
from datasets.selectors import datasets_in_scope
from knowledge.models import Document, DocumentOrigin, Erasure, Space
from knowledge.scope import access_scope_build
from outside.selectors import snapshots_still_usable

logger = logging.getLogger(__name__)
OUTSIDE = DocumentOrigin.OUTSIDE


def _lock_access_rows(
    *, user: User, api_key: ApiKey | None, spaces: set[int], datasets: set[int]
) -> tuple[User | None, bool]:
    """Take FOR SHARE locks on every row that grants this publication: the user, the
    originating key and the user's (and groups') permission rows on the spaces involved.
    Returns the user as the database has it now (None if gone) and whether the key (if
    any) is still unrevoked, read by the very statements that lock them.

    A revocation (UPDATE of the key, DELETE of a permission, deactivation) that started
    first is waited for and then seen; one that starts later waits until this
    publication commits. So revocation and sealing are serialised (issue 10, item 7).
    """
    user_model = type(user)
    locked = user_model.objects.raw(
        f"SELECT * FROM {_table(user_model)} WHERE id = %s FOR SHARE",  # noqa: S608
        [user.pk],
    )
    current = next(iter(locked), None)
    key_valid = True
    with connection.cursor() as cursor:
        if api_key is not None:
            cursor.execute(
                f"SELECT revoked_at IS NULL FROM {_table(ApiKey)} WHERE id = %s FOR SHARE",  # noqa: S608
                [api_key.pk],
            )
            row = cursor.fetchone()
            key_valid = bool(row and row[0])
        space_ids = spaces | set(
            Dataset.objects.filter(pk__in=datasets).values_list("space_id", flat=True)
        )
        if not space_ids:
            return current, key_valid
        content_type = ContentType.objects.get_for_model(Space)
        keys = [str(pk) for pk in space_ids]
        cursor.execute(
            f"SELECT 1 FROM {_table(UserObjectPermission)} "  # noqa: S608
            "WHERE user_id = %s AND content_type_id = %s AND object_pk = ANY(%s) FOR SHARE",
            [user.pk, content_type.pk, keys],
        )
        cursor.execute(
            f"SELECT 1 FROM {_table(GroupObjectPermission)} g "  # noqa: S608
            "WHERE g.content_type_id = %s AND g.object_pk = ANY(%s) AND g.group_id IN "
            f"(SELECT group_id FROM {_table(user_model.groups.through)} WHERE user_id = %s) "
            "FOR SHARE",
            [content_type.pk, keys, user.pk],
        )
    return current, key_valid


def _quoted_revisions_fit(selected: list[SelectedFact]) -> str | None:
    """None when every quoted revision is still its document's current one, not erased,
    and no quoted document is withdrawn, else `source_erased` / `source_withdrawn` /
    `source_superseded`. Read with a FOR
    SHARE lock on the documents: a new revision made current (or a withdrawal) first is
    waited for and seen; one made later waits until this publication commits."""
    quoted = {
        (s.fact.source["document_id"], s.fact.source["revision_id"])
        for s in selected
        if s.fact.kind == "quote"
    }
    if not quoted:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT d.id, d.current_revision_id, d.withdrawn_at IS NOT NULL, "  # noqa: S608
            f"EXISTS (SELECT 1 FROM {_table(Erasure)} e WHERE e.document_id = d.id "
            "AND e.revision_id = ANY(%s)) "
            f"FROM {_table(Document)} d WHERE d.id = ANY(%s) FOR SHARE OF d",
            [
                sorted({revision for _, revision in quoted}),
                sorted({document for document, _ in quoted}),
            ],
        )
        rows = {
            pk: (current, withdrawn, erased) for pk, current, withdrawn, erased in cursor.fetchall()
        }
    if any(rows.get(document, (None, False, False))[2] for document, _ in quoted):
        return "source_erased"
    if any(rows.get(document, (None, False))[1] for document, _ in quoted):
        return "source_withdrawn"
    if not all(rows.get(document, (None, False))[0] == revision for document, revision in quoted):
        return "source_superseded"
    return None


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def publication_recheck(
    *, run: AnswerRun, user: User, api_key: ApiKey | None, selected: list[SelectedFact]
) -> str | None:
    """None when publication may go ahead, else the typed reason.

    Precondition: called inside the publication transaction (it takes row locks that
    hold until that transaction ends).

    Re-reads from the database: the originating key is not revoked, the user is active,
    every selected document and dataset is still visible, every quoted revision is still
    its document's current one (`source_superseded`) and not withdrawn
    (`source_withdrawn`), every private file is still
    among the run's selected sources and in the conversation's current selection
    (`ConversationSource`: deselecting a file withdraws it from answers not yet sealed),
    and every memory entry the plan used is still valid. A database failure is
    `permission_unavailable`: unknown is never treated as allowed.
    """
    try:
        # A savepoint: a failed read must not poison the publication transaction.
        with transaction.atomic():
            documents = {s.fact.source["document_id"] for s in selected if s.fact.kind == "quote"}
            datasets = {s.fact.source["dataset_id"] for s in selected if s.fact.kind == "value"}
            quoted = list(
                Document.objects.filter(pk__in=documents).values_list("pk", "space_id", "origin")
            )
            spaces = {space for _, space, _ in quoted if space is not None}
            current, key_valid = _lock_access_rows(
                user=user, api_key=api_key, spaces=spaces, datasets=datasets
            )
            if not key_valid or current is None or not current.is_active:
                return "access_denied"
            # A fresh scope, read after the locks: every space the user may read now, and
            # which of the quoted private files are the user's own.
            private = {pk for pk, space, origin in quoted if space is None and origin != OUTSIDE}
            scope = access_scope_build(user=current, selected_sources=sorted(private))
            in_scope = {pk for pk, space, _ in quoted if space in scope.space_ids}
            # An outside snapshot: still the asker's, unchanged, and its channel still
            # enabled for a space the asker may read now.
            fetched = snapshots_still_usable(
                user_id=current.pk,
                quoted=[
                    (
                        s.fact.source["outside"]["snapshot_id"],
                        s.fact.source["document_id"],
                        s.fact.source["revision_id"],
                    )
                    for s in selected
                    if s.fact.kind == "quote" and s.fact.source.get("outside")
                ],
                space_ids=scope.space_ids,
            )
            if in_scope | scope.file_ids | fetched != documents:
                return "access_denied"
            unfit = _quoted_revisions_fit(selected)
            if unfit:
                return unfit
            # Selected when the run started, and still in the conversation's selection now.
            _, still_selected = conversation_selection(conversation_id=run.conversation_id)
            if not private <= set(run.selected_sources) & still_selected:
                return "access_denied"
            seen = datasets_in_scope(scope=scope).filter(pk__in=datasets)
            if set(seen.values_list("pk", flat=True)) != datasets:
                return "access_denied"
            denied = hooks.memory_recheck.call(run=run, user=current, scope=scope)
            if denied:
                return denied
    except DatabaseError:
        logger.exception("permission recheck failed")
        return "permission_unavailable"
    return None
