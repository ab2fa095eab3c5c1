"""Each fixed explanation in each of the four languages (Django i18n catalogues)."""

import pytest

from answers.models import Conversation
from answers.pipeline import texts
from answers.pipeline.vocabulary import Plan
from core.services import api_key_create, api_key_revoke
from tests.answers.helpers import ask
from tests.answers.providers import ScriptedProvider

pytestmark = pytest.mark.django_db

MARKERS = {  # a word each language's text must contain, so an untranslated catalogue fails
    "insufficient_evidence": {
        "en": "library",
        "de": "Bibliothek",
        "fr": "bibliothèque",
        "ja": "ライブラリ",
    },
    "access_failure": {"en": "source", "de": "Quelle", "fr": "source", "ja": "資料"},
    "unsupported": {"en": "capability", "de": "Fähigkeit", "fr": "capacité", "ja": "機能"},
}


def answer_for(kind: str, user, language: str) -> dict:
    if kind == "insufficient_evidence":
        return ask(user, "Which moons orbit Jupiter?", language=language)
    if kind == "unsupported":
        return ask(user, "Compare retention versus backups", language=language)
    issued = api_key_create(user=user)
    provider = ScriptedProvider(
        # The sentence that answers (a heading would fail answer-type agreement first).
        [lambda c: {"facts": [{"fact_id": next(v.fact_id for v in c if "owns" in v.text)}]}],
        plan=Plan("Who owns service reviews?", ["Who owns service reviews?"]),
        on_select=lambda attempt: api_key_revoke(prefix=issued.api_key.prefix),
    )
    return ask(user, "q", provider=provider, api_key=issued.api_key, language=language)


@pytest.mark.parametrize("language", texts.LANGUAGES)
@pytest.mark.parametrize("kind", sorted(MARKERS))
def test_each_fixed_explanation_in_each_language(library, member, kind, language):
    body = answer_for(kind, member, language)
    assert body["answer"]["language"] == language
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["text"] == texts.explanation(kind, language)
    assert MARKERS[kind][language] in body["answer"]["text"]
    if language != "en":
        assert body["answer"]["text"] != texts.explanation(kind, "en")


def test_an_answer_is_introduced_in_the_requested_language(library, member):
    body = ask(member, "Who owns service reviews?", language="de")
    assert body["answer"]["text"].startswith("Aus Ihrer Bibliothek:")
    assert "Revision 1 vom" in body["answer"]["text"]


def test_language_falls_back_to_the_conversation_then_the_setting(library, member, settings):
    settings.KOINON_RESPONSE_LANGUAGE = "fr"
    assert ask(member, "Which moons orbit Jupiter?")["answer"]["language"] == "fr"
    conversation = Conversation.objects.create(user=member, language="ja")
    body = ask(member, "Which moons orbit Jupiter?", conversation_id=conversation.pk)
    assert body["answer"]["language"] == "ja"
