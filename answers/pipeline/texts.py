"""Every sentence koinon writes itself. Translated with Django i18n (en, de, fr, ja)."""

from collections.abc import Callable

from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

LANGUAGES = ("en", "de", "fr", "ja")


def _in(language: str, make: Callable[[], object]) -> str:
    with translation.override(language):
        return str(make())


def introduction(language: str, *, outside: bool = False) -> str:
    """The fixed first line; `outside`: a quote comes from an outside channel's snapshot."""
    if outside:
        return _in(language, lambda: _("From your library and outside sources:"))
    return _in(language, lambda: _("From your library:"))


def general_knowledge_label(language: str) -> str:
    return _in(
        language,
        lambda: _("General knowledge from the model, not from your library (no sources):"),
    )


def explanation(kind: str, language: str, *, documents: int = 0) -> str:
    """The fixed text that replaces an answer: no prose, sources or claims. `documents`:
    for `indexing`, how many documents were still waiting for their vectors."""
    if kind == "indexing":
        return _in(language, lambda: _indexing(documents))
    texts = {
        "insufficient_evidence": lambda: _(
            "Not in your library: the sources you may see do not answer this question. "
            "Refine the question or select another source."
        ),
        "access_failure": lambda: _(
            "A source needed for this answer could not be accessed, so no answer was "
            "published. Try again later or ask an administrator."
        ),
        "source_withdrawn": lambda: _(
            "A source this answer quoted has been withdrawn by its curators, so the answer "
            "is no longer shown. Regenerate it to answer from the current sources."
        ),
        "unsupported": lambda: _(
            "This request needs a capability that the configured model provider does not "
            "have (such as a comparison or an ungrounded answer), so no answer was published."
        ),
    }
    return _in(language, texts[kind])


def _indexing(documents: int) -> str:
    # Said while the semantic search channel catches up (a fresh start, a large upload):
    # nothing is inaccessible, and asking again soon will do.
    if not documents:
        return _(
            "Documents were still being indexed for semantic search, so the search was "
            "incomplete and no answer was published. Try again in a few minutes."
        )
    return ngettext(
        "%(count)s document is still being indexed for semantic search, so the search was "
        "incomplete and no answer was published. Try again in a few minutes.",
        "%(count)s documents are still being indexed for semantic search, so the search was "
        "incomplete and no answer was published. Try again in a few minutes.",
        documents,
    ) % {"count": documents}


def regeneration_notice(language: str) -> str:
    """What a conversation, replay or export shows instead of prose that was never
    sealed, or that a newer generation replaced."""
    return _in(
        language,
        lambda: _(
            "This answer was not sealed or has been replaced by a newer one, so its text is "
            "not shown. Regenerate it to get a verified answer."
        ),
    )


def erased_notice(language: str, day: object) -> str:
    """What replaces a sealed answer that quoted a revision erased since (`day`: the
    date of the erasure, written as an ISO date in every language)."""
    when = day.isoformat() if hasattr(day, "isoformat") else str(day)
    return _in(
        language,
        lambda: (
            _(
                "A source this answer quoted was erased on %(date)s, so the answer is no longer "
                "shown. Regenerate it to answer from the current sources."
            )
            % {"date": when}
        ),
    )


def revision_label(language: str, number: int, date: str) -> str:
    return _in(
        language, lambda: _("revision %(number)s of %(date)s") % {"number": number, "date": date}
    )


def fetched_label(language: str, origin: str, date: str) -> str:
    """Where an outside snapshot's text came from and when it was fetched."""
    return _in(
        language,
        lambda: _("fetched from %(origin)s on %(date)s") % {"origin": origin, "date": date},
    )


def snapshot_label(language: str, dataset: str, version: int) -> str:
    return _in(
        language,
        lambda: (
            _("dataset %(dataset)s, snapshot %(version)s")
            % {"dataset": dataset, "version": version}
        ),
    )
