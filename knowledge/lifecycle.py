"""Taking documents out of the current library and bringing them back (services).

Withdrawn: not searched, not quotable — its passages stop being current and the
space's lexeme counts move with them — while its revisions, texts and every receipt that
cited it stay. Sealed answers that quoted it read as a fixed "source withdrawn" notice
(answers.boundary) and can be regenerated; publication refuses it (`source_withdrawn`).
"""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import writing
from core.inputs import text_field_parse
from core.types import User
from knowledge.documents.extraction import document_set_current
from knowledge.documents.upload import document_change_check
from knowledge.frequencies import lexeme_frequencies_shift
from knowledge.models import Document, Passage

WITHDRAW_REASON_MAX = 500


def _check(user: User, document: Document) -> None:
    document_change_check(
        user=user, space=document.space, private=document.is_private, document=document
    )


def document_withdraw(*, user: User, document: Document, reason: str = "") -> Document:
    """Take the document out of the current library; already withdrawn: unchanged.

    Precondition: `document` came from a permission-scoped selector; the role is
    checked here (curators of its space, superusers; a private file's owner). The row
    lock orders it with a publication's FOR SHARE read of the document (answers recheck):
    an answer sealed after this commits cannot quote it.
    """
    _check(user, document)
    reason = text_field_parse(reason, field="reason", limit=WITHDRAW_REASON_MAX, required=False)
    with (
        writing(_("the withdrawal of “%(title)s”") % {"title": document.title}),
        transaction.atomic(),
    ):
        locked = Document.objects.select_for_update().get(pk=document.pk)
        if locked.withdrawn_at is None:
            lexeme_frequencies_shift(document=locked, revision=None)
            Passage.objects.filter(document=locked, is_current=True).update(is_current=False)
            locked.withdrawn_at = timezone.now()
            locked.withdrawn_by = user
            locked.withdrawn_reason = reason
            locked.save(update_fields=["withdrawn_at", "withdrawn_by", "withdrawn_reason"])
    return locked


def document_restore(*, user: User, document: Document) -> Document:
    """Bring a withdrawn document back: its current revision is searched and quotable
    again. Not withdrawn: unchanged. Same role check as withdrawing."""
    _check(user, document)
    with (
        writing(_("the restoring of “%(title)s”") % {"title": document.title}),
        transaction.atomic(),
    ):
        locked = Document.objects.select_for_update().get(pk=document.pk)
        if locked.withdrawn_at is not None:
            locked.withdrawn_at, locked.withdrawn_by, locked.withdrawn_reason = None, None, ""
            locked.save(update_fields=["withdrawn_at", "withdrawn_by", "withdrawn_reason"])
            if locked.current_revision is not None:
                document_set_current(document=locked, revision=locked.current_revision)
    return locked
