"""A quote from a PDF with the page's furniture (issue 51, item 4): the passages hold no
running header, footer or page number, the hyphenated word reads whole, and the quote still
passes both checks (the serving reading at its offsets, the other reading by its words)."""

import pytest

from answers.pipeline.vocabulary import Plan
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.models import ExtractionStatus, Passage
from knowledge.normalise import normalised_key
from tests.answers.helpers import ask
from tests.answers.providers import ScriptedProvider
from tests.knowledge.helpers import HANDBOOK_PAGES, furnished_pdf

pytestmark = pytest.mark.django_db

QUESTION = "How often are restores tested?"
SENTENCE = (
    "Restores are tested every month by the operations team, and each restore test is "
    "written down in the service log together with the time it took."
)


def select_restores(candidates):
    """The sentence that was hyphenated over a line break ("test-" / "ed"), alone."""
    for candidate in candidates:
        start = candidate.text.find("Restores are tested")
        if start >= 0:
            end = candidate.text.index("time it took.") + len("time it took.")
            return {"facts": [{"fact_id": candidate.fact_id, "start": start, "end": end}]}
    raise AssertionError("no candidate holds the sentence")


def test_a_quote_from_a_furnished_pdf_is_clean_and_passes_both_checks(space, owner, member):
    upload = document_upload(
        user=owner, filename="handbook.pdf", data=furnished_pdf(HANDBOOK_PAGES), space=space
    )
    revision_extract(revision_id=upload.revision.pk)
    readings = {e.role: e for e in upload.revision.extractions.all()}
    assert {e.status for e in readings.values()} == {ExtractionStatus.ADMITTED}
    assert readings["primary"].serves_passages
    passages = list(Passage.objects.filter(revision=upload.revision).values_list("text", flat=True))
    assert passages
    for text in passages:
        assert "Operations Handbook" not in text and "Page " not in text and "-\n" not in text
        assert not any(line.strip().isdigit() for line in text.splitlines())

    provider = ScriptedProvider(
        [select_restores], plan=Plan(standalone=QUESTION, searches=[QUESTION])
    )
    body = ask(member, QUESTION, provider=provider)

    assert body["evidence"]["answer_status"] == "evidence_backed"
    citation = body["answer"]["citations"][0]
    assert " ".join(citation["quote"].split()) == SENTENCE
    assert citation["locator"]["page"] == 2
    # The second check found it by its words in the other reading, "tested" whole there too.
    assert normalised_key(SENTENCE) in readings["secondary"].norm_text
