"""Erasing a revision's text for good (services; docs/erasure.md).

Withdrawing keeps a document's text; erasing removes one revision's text everywhere
koinon stored it: the file, both extractions, the passages and their vectors, and every
copy the answer path made (candidate facts, run bodies, messages, stream events, audits,
MCP call records, the runs' JSON-lines traces), which keep a tombstone in its place. The
database part is one call of `koinon_erase_revision` (knowledge/migrations/0013), which
also writes the append-only erasure log row; records stay closed to every other change.
Output releases hold hashes and ids only and are not touched: an export made before still
verifies, and a sealed answer that quoted the revision reads as the fixed "erased on
<date>" notice (answers.boundary).
"""

import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import overload

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils.translation import gettext as _

from core.errors import ConflictError, UnprocessableError, writing
from core.inputs import text_field_parse
from core.types import User
from knowledge.display import quote_display, single_line
from knowledge.documents.upload import document_change_check
from knowledge.frequencies import lexeme_frequencies_shift
from knowledge.models import Document, DocumentRevision, Erasure

logger = logging.getLogger(__name__)

ERASE_REASON_MAX = 500
TOMBSTONE = "[erased]"  # the same as knowledge/migrations/0013_erasure_path.TOMBSTONE
# Shorter pieces (white space and quotation marks aside) are not hunted for in copies:
# the function refuses them too, so that no caller can blank common words with it.
HUNTED_MIN = 12
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")


def revision_erase(
    *, user: User, document: Document, revision: DocumentRevision, reason: str
) -> Erasure:
    """Erase the revision's text for good and return the erasure log row.

    Precondition: `document` came from a permission-scoped selector; the role is checked
    here (curators of its space and superusers; a private file's owner), as for
    withdrawing. Raises UnprocessableError (no reason, or a revision of another document)
    and ConflictError `already_erased`. The stored file and the runs' traces are removed
    after the commit.
    """
    document_change_check(
        user=user, space=document.space, private=document.is_private, document=document
    )
    reason = erase_reason_parse(reason)
    if revision.document_id != document.pk:
        raise UnprocessableError(
            "That revision is not one of this document's.",
            code="invalid",
            fields={"revision": "Not a revision of this document."},
        )
    action = _("the erasure of revision %(number)s of “%(title)s”") % {
        "number": revision.number,
        "title": document.title,
    }
    with writing(action), transaction.atomic():
        locked = Document.objects.select_for_update().get(pk=document.pk)
        if Erasure.objects.filter(revision=revision).exists():
            raise ConflictError("This revision's text is already erased.", code="already_erased")
        if locked.current_revision_id == revision.pk:
            lexeme_frequencies_shift(document=locked, revision=None)
        strings = erased_strings(revision=revision)
        runs = runs_drawing_on(revision=revision)
        stored_file = revision.file.name
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT koinon_erase_revision(%s, %s, %s, %s::text[])",
                [revision.pk, user.pk, reason, strings],
            )
            erasure_id = cursor.fetchone()[0]
        transaction.on_commit(lambda: _erase_outside(stored_file, runs, strings))
    return Erasure.objects.select_related("revision", "erased_by").get(pk=erasure_id)


def erase_reason_parse(reason: object) -> str:
    """The erasure log's reason as stored; UnprocessableError for none, a number or a NUL
    (asked before the library's confirmation page too, so that it never confirms a refusal)."""
    try:
        return text_field_parse(reason, field="reason", limit=ERASE_REASON_MAX, required=True)
    except UnprocessableError as error:  # it cannot be undone: a reason is required
        raise UnprocessableError(
            "Say why the text is erased.", code="invalid", fields=error.fields
        ) from None


def erased_strings(*, revision: DocumentRevision) -> list[str]:
    """What copies of this revision's text look like: its sentences and lines, its
    passages, every quote an answer took from it, each also as answers display it."""
    found: set[str] = set()
    for text, norm_text in revision.extractions.values_list("text", "norm_text"):
        for whole in (text, norm_text):
            found.update(piece.strip() for piece in _SENTENCE_END.split(whole))
    found.update(revision.passages.values_list("text", flat=True))
    found.update(
        _text_of_revision("answers_candidatefact", "text", "source", revision.pk)
        + _text_of_revision("answers_citation", "data->>'quote'", "data", revision.pk)
    )
    for piece in list(found):
        found.update((single_line(piece), quote_display(piece)))
    return sorted(s for s in found if len(_key(s)) >= HUNTED_MIN)


def _key(text: str) -> str:
    return "".join(c for c in text.lower() if not c.isspace() and c not in "“”‘’\"'")


def _text_of_revision(table: str, column: str, source: str, revision_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM {table} "  # noqa: S608 - names are constants above
            f"WHERE {source}->>'revision_id' = %s AND {column} IS NOT NULL",
            [str(revision_id)],
        )
        return [row[0] for row in cursor.fetchall()]


def runs_drawing_on(*, revision: DocumentRevision) -> list[str]:
    """The runs with a candidate fact from the revision (the same scope as the function)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT run_id::text FROM answers_candidatefact "
            "WHERE source->>'revision_id' = %s",
            [str(revision.pk)],
        )
        return [row[0] for row in cursor.fetchall()]


def _erase_outside(stored_file: str | None, runs: list[str], strings: list[str]) -> None:
    """After the commit: the stored file, and the strings in those runs' traces."""
    if stored_file:
        try:
            default_storage.delete(stored_file)
        except OSError:
            logger.exception("an erased revision's file could not be deleted")
    ordered = sorted(strings, key=len, reverse=True)
    for run_id in runs:
        trace_scrub(path=settings.LOG_DIR / f"{run_id}.jsonl", strings=ordered)


def trace_scrub(*, path: Path, strings: list[str]) -> bool:
    """Replace the strings by the tombstone in every string of a JSON-lines trace, written
    to a new file that replaces the old one. Whether the trace changed."""
    if not path.exists():
        return False
    lines = path.read_text(encoding="utf-8").splitlines()
    scrubbed = []
    for line in lines:
        try:
            scrubbed.append(json.dumps(_scrub(json.loads(line), strings), sort_keys=True))
        except ValueError:
            scrubbed.append(_scrub(line, strings))  # not JSON: treated as text
    if scrubbed == lines:
        return False
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".erasing-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write("".join(line + "\n" for line in scrubbed))
    os.replace(temporary, path)
    return True


@overload
def _scrub(value: str, strings: list[str]) -> str: ...
@overload
def _scrub(value: object, strings: list[str]) -> object: ...
def _scrub(value: object, strings: list[str]) -> object:
    if isinstance(value, str):
        for s in strings:
            if s in value:
                value = value.replace(s, TOMBSTONE)
        return value
    if isinstance(value, list):
        return [_scrub(item, strings) for item in value]
    if isinstance(value, dict):
        return {key: _scrub(item, strings) for key, item in value.items()}
    return value
