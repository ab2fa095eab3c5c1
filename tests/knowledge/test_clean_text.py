"""Quotes come from clean text (issue 25): a damaged primary gives way to a clean secondary.

The PDFs are written byte by byte (tests/knowledge/helpers.py) with words placed by
kerning offsets: at one gap pdfplumber (primary) glues the words and pypdf (secondary)
does not, at a smaller gap both glue, at a larger one neither does. Extraction runs for
real, in process, as in the other knowledge tests.
"""

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from answers.models import CandidateFact
from answers.pipeline.validation import (
    SelectedFact,
    SelectionRejected,
    quotes_secondary_failures,
    quotes_verify_primary,
    quotes_verify_secondary,
)
from answers.pipeline.vocabulary import Plan
from knowledge.documents.extraction import revision_extract, revision_retry_extraction
from knowledge.documents.upload import document_upload
from knowledge.models import Document, DocumentRevision, Extraction, Passage
from knowledge.selectors import document_admitted_text
from knowledge.services import space_member_set
from tests.answers.helpers import ask
from tests.answers.providers import ScriptedProvider
from tests.helpers import client_for, make_user
from tests.knowledge.helpers import (
    BACKUP_POLICY,
    GAP_BOTH_CLEAN,
    GAP_BOTH_GLUED,
    GAP_PRIMARY_GLUED,
    kerned_pdf,
)

pytestmark = pytest.mark.django_db

CLEAN_TEXT = "\n".join(BACKUP_POLICY)
GLUED_TEXT = "\n".join(line.replace(" ", "") for line in BACKUP_POLICY)
SENTENCE = BACKUP_POLICY[0]  # "The backup service keeps every nightly copy for ninety days."


def upload(owner, space, gap: int, name: str = "backup-policy.pdf") -> DocumentRevision:
    data = kerned_pdf(BACKUP_POLICY, gap=gap)
    return document_upload(user=owner, filename=name, data=data, space=space).revision


def ingest(owner, space, gap: int) -> DocumentRevision:
    revision = upload(owner, space, gap)
    revision_extract(revision_id=revision.pk)
    return revision


def readings(revision: DocumentRevision) -> tuple[Extraction, Extraction]:
    primary, secondary = Extraction.objects.filter(revision=revision).order_by("role")
    return primary, secondary


def quote_of(passage: Passage, text: str, *, in_text: str | None = None) -> SelectedFact:
    """A selected quote of `text` inside the passage, as the pipeline records candidates."""
    fact = CandidateFact(
        fact_id="q1",
        kind="quote",
        text=in_text if in_text is not None else passage.text,
        source={
            "type": "passage",
            "passage_id": passage.pk,
            "document_id": passage.document_id,
            "revision_id": passage.revision_id,
            "extraction_id": passage.extraction_id,
            "char_start": passage.char_start,
            "char_end": passage.char_end,
        },
    )
    start = fact.text.index(text)
    return SelectedFact(fact, start, start + len(text))


def test_a_glued_primary_gives_way_to_the_clean_secondary(space, owner):
    revision = ingest(owner, space, GAP_PRIMARY_GLUED)
    primary, secondary = readings(revision)
    assert (primary.extractor, secondary.extractor) == ("pdfplumber", "pypdf")
    assert (primary.text, secondary.text) == (GLUED_TEXT, CLEAN_TEXT)
    assert (primary.damage, secondary.damage) == (1.0, 0.0)
    assert primary.is_damaged and not secondary.is_damaged
    assert (primary.serves_passages, secondary.serves_passages) == (False, True)
    assert {(e.status, e.progress) for e in (primary, secondary)} == {("admitted", 100)}

    passages = list(Passage.objects.filter(revision=revision).order_by("ordinal"))
    assert passages and {p.extraction_id for p in passages} == {secondary.pk}
    for passage in passages:
        assert secondary.text[passage.char_start : passage.char_end] == passage.text
        assert passage.locator == {"page": 1} and passage.is_current
        assert passage.embedding_status == "embedded"
    assert SENTENCE in passages[0].text

    document = Document.objects.get(pk=revision.document_id)
    assert document.current_revision_id == revision.pk
    assert document_admitted_text(document=document) == secondary
    revision = DocumentRevision.objects.prefetch_related("extractions").get(pk=revision.pk)
    assert revision.text_warning == (
        "The primary extraction looks damaged (100% of its words glued): passages and "
        "quotes come from the clean secondary extraction (pypdf)."
    )


def test_a_quote_from_the_clean_text_passes_both_checks(space, owner):
    revision = ingest(owner, space, GAP_PRIMARY_GLUED)
    primary, _ = readings(revision)
    passage = Passage.objects.get(revision=revision)
    selected = [quote_of(passage, SENTENCE)]
    quotes_verify_primary(selected)  # (a) the serving text at its offsets
    quotes_verify_secondary(selected)  # (b) the glued primary, spaces removed on both sides

    # (b) still refuses what the glued text does not say.
    altered = SENTENCE.replace("nightly", "weekly")
    forged = quote_of(passage, altered, in_text=passage.text.replace(SENTENCE, altered))
    assert quotes_secondary_failures([selected[0], forged]) == {1}

    # A quote of the reading that does not serve passages is no evidence.
    glued = Passage(
        extraction=primary,
        revision=revision,
        document_id=revision.document_id,
        char_start=0,
        char_end=len(primary.text),
        text=primary.text,
    )
    with pytest.raises(SelectionRejected) as rejected:
        quotes_verify_primary([quote_of(glued, primary.text.splitlines()[0])])
    assert rejected.value.issue == "quote_source_not_admitted"


@pytest.mark.parametrize("damage", [0.0, None], ids=["undamaged", "not-measured"])
def test_the_second_reading_is_compared_word_by_word_unless_it_is_damaged(space, owner, damage):
    revision = ingest(owner, space, GAP_PRIMARY_GLUED)
    primary, _ = readings(revision)
    Extraction.objects.filter(pk=primary.pk).update(damage=damage)
    passage = Passage.objects.get(revision=revision)
    # The clean words are not whole words of the glued text: only a damaged one is searched
    # with its spaces removed.
    with pytest.raises(SelectionRejected) as rejected:
        quotes_verify_secondary([quote_of(passage, SENTENCE)])
    assert rejected.value.issue == "quote_not_in_secondary_extraction"


def test_an_answer_quotes_the_clean_text(space, owner, member):
    revision = ingest(owner, space, GAP_PRIMARY_GLUED)
    _, secondary = readings(revision)

    def select(candidates):
        quote = next(c for c in candidates if c.kind == "quote" and SENTENCE in c.text)
        start = quote.text.index(SENTENCE)
        return {"facts": [{"fact_id": quote.fact_id, "start": start, "end": start + len(SENTENCE)}]}

    plan = Plan(
        standalone="How long are backups kept?",
        searches=["backup service nightly copy"],
        dataset_queries=[],
    )
    body = ask(member, "How long are backups kept?", provider=ScriptedProvider([select], plan=plan))
    assert body["evidence"]["answer_status"] == "evidence_backed", body["quality"]
    [citation] = body["answer"]["citations"]
    assert citation["quote"] == SENTENCE and citation["revision_id"] == revision.pk
    assert f"“{SENTENCE}”" in body["answer"]["text"]
    fact = CandidateFact.objects.get(run_id=body["run_id"], fact_id=citation["fact_id"])
    assert fact.source["extraction_id"] == secondary.pk


def test_both_readings_damaged_are_admitted_with_a_warning(space, owner):
    revision = ingest(owner, space, GAP_BOTH_GLUED)
    primary, secondary = readings(revision)
    assert primary.text == secondary.text == GLUED_TEXT
    assert primary.is_damaged and secondary.is_damaged
    assert (primary.status, secondary.status) == ("admitted", "admitted")
    assert (primary.serves_passages, secondary.serves_passages) == (True, False)
    assert {p.extraction_id for p in Passage.objects.filter(revision=revision)} == {primary.pk}
    assert Document.objects.get(pk=revision.document_id).current_revision_id == revision.pk

    detail = client_for(owner).get(f"/v1/documents/{revision.document_id}").json()
    [shown] = detail["revisions"]
    assert shown["text_warning"].startswith("The text looks damaged (100% of its words glued)")
    assert [
        (e["role"], e["damage"], e["damaged"], e["serves_passages"]) for e in shown["extractions"]
    ] == [("primary", 1.0, True, True), ("secondary", 1.0, True, False)]

    # Glued quotes still pass both checks: the secondary is searched without spaces.
    passage = Passage.objects.get(revision=revision)
    selected = [quote_of(passage, GLUED_TEXT.splitlines()[0])]
    quotes_verify_primary(selected)
    quotes_verify_secondary(selected)


def test_neither_reading_damaged_changes_nothing(space, owner):
    revision = ingest(owner, space, GAP_BOTH_CLEAN)
    primary, secondary = readings(revision)
    assert primary.text == secondary.text == CLEAN_TEXT
    assert (primary.damage, secondary.damage) == (0.0, 0.0)
    assert (primary.serves_passages, secondary.serves_passages) == (True, False)
    passage = Passage.objects.get(revision=revision)
    assert passage.extraction_id == primary.pk
    selected = [quote_of(passage, SENTENCE)]
    quotes_verify_primary(selected)
    quotes_verify_secondary(selected)

    detail = client_for(owner).get(f"/v1/documents/{revision.document_id}").json()
    assert detail["revisions"][0]["text_warning"] == ""
    text = client_for(owner).get(f"/v1/documents/{revision.document_id}/text").json()
    assert (text["role"], text["extractor"], text["text"]) == ("primary", "pdfplumber", CLEAN_TEXT)


def test_the_document_text_api_returns_the_clean_text(space, owner, member):
    revision = ingest(owner, space, GAP_PRIMARY_GLUED)
    text = client_for(member).get(f"/v1/documents/{revision.document_id}/text").json()
    assert (text["role"], text["extractor"], text["text"]) == ("secondary", "pypdf", CLEAN_TEXT)


def test_curators_see_the_damage_and_the_warning_in_admin(space, owner):
    revision = ingest(owner, space, GAP_BOTH_GLUED)
    curator = make_user("curator", staff=True)
    space_member_set(space=space, username="curator", role="curator")
    client = Client()
    client.force_login(curator)

    page = client.get(f"/admin/knowledge/documentrevision/{revision.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "The text looks damaged (100% of its words glued)" in html
    assert "100% of words glued (damaged)" in html  # the extraction inline

    listing = client.get("/admin/knowledge/documentrevision/").content.decode()
    assert "The text looks damaged" in listing and "serves passages" in listing
    extractions = client.get("/admin/knowledge/extraction/").content.decode()
    assert extractions.count("100% of words glued (damaged)") == 2


def test_a_retry_reads_an_admitted_secondary_again_while_nothing_serves(space, owner):
    revision = upload(owner, space, GAP_PRIMARY_GLUED)
    # An earlier run: the primary's worker timed out, the secondary was admitted (clean).
    Extraction.objects.filter(revision=revision, role="primary").update(
        status="failed", error_code="timeout", progress=100
    )
    Extraction.objects.filter(revision=revision, role="secondary").update(
        status="admitted", text=CLEAN_TEXT, damage=0.0, progress=100
    )
    revision_retry_extraction(revision=revision)
    assert set(revision.extractions.values_list("status", flat=True)) == {"pending"}
    revision_extract(revision_id=revision.pk)
    primary, secondary = readings(revision)
    assert (primary.serves_passages, secondary.serves_passages) == (False, True)
    assert Passage.objects.get(revision=revision).extraction_id == secondary.pk


def test_a_clean_secondary_admitted_in_an_earlier_run_cannot_serve(space, owner):
    revision = upload(owner, space, GAP_PRIMARY_GLUED)
    # Its segments (page locators) are gone with that run: the damaged primary serves.
    Extraction.objects.filter(revision=revision, role="secondary").update(
        status="admitted", text=CLEAN_TEXT, damage=0.0, progress=100
    )
    revision_extract(revision_id=revision.pk)
    primary, secondary = readings(revision)
    assert (primary.serves_passages, secondary.serves_passages) == (True, False)
    revision = DocumentRevision.objects.prefetch_related("extractions").get(pk=revision.pk)
    assert revision.text_warning.startswith("The text looks damaged (100% of its words glued)")


CODE = (
    "def get_backup_copies(days: int) -> list[str]:\n"
    "    return [copy.name for copy in copies if copy.age_in_days < days]\n"
)


@pytest.mark.parametrize(
    "text", ["1 2 3\n42 17 2024-01-01\n3.14159\n", CODE], ids=["numbers", "code"]
)
def test_text_without_words_to_measure_is_admitted_undamaged(space, owner, text):
    result = document_upload(user=owner, filename="notes.txt", data=text.encode(), space=space)
    revision_extract(revision_id=result.revision.pk)
    primary, secondary = readings(result.revision)
    assert (primary.status, primary.damage, primary.serves_passages) == ("admitted", 0.0, True)
    assert (secondary.damage, secondary.serves_passages) == (0.0, False)


def test_a_text_that_fails_extraction_is_not_measured_and_serves_nothing(space, owner):
    result = document_upload(user=owner, filename="blank.txt", data=b"  \n \n", space=space)
    revision_extract(revision_id=result.revision.pk)
    primary, secondary = readings(result.revision)
    outcome = {(e.status, e.error_code, e.damage, e.serves_passages) for e in (primary, secondary)}
    assert outcome == {("failed", "no_text", None, False)}
    revision = DocumentRevision.objects.prefetch_related("extractions").get(pk=result.revision.pk)
    assert revision.text_warning == ""


def test_one_admitted_extraction_at_most_serves_a_revision(space, owner):
    revision = ingest(owner, space, GAP_BOTH_CLEAN)
    primary, secondary = readings(revision)
    with pytest.raises(IntegrityError), transaction.atomic():
        Extraction.objects.filter(pk=secondary.pk).update(serves_passages=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        Extraction.objects.filter(pk=primary.pk).update(status="pending")


@pytest.mark.parametrize(
    ("gap", "warning"),
    [
        (GAP_BOTH_GLUED, "The text of revision 1 looks damaged (100% of its words glued)"),
        (GAP_PRIMARY_GLUED, "The first reading of revision 1 looks damaged (100% of its words"),
        (GAP_BOTH_CLEAN, None),
    ],
    ids=["both-damaged", "primary-damaged", "clean"],
)
def test_the_library_page_shows_a_revisions_damage_warning(space, owner, member, gap, warning):
    ingest(owner, space, gap)
    for user in (owner, member):  # curators and readers: it explains the quotes they see
        client = Client()
        client.force_login(user)
        page = client.get(f"/spaces/{space.pk}/").content.decode()
        if warning is None:
            assert "data-text-warning" not in page
        else:
            assert "data-text-warning" in page and warning in page
