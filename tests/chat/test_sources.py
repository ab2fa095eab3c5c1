"""The source view (issue 29, first step): a citation opens its quotation inside the text it
was checked against, with the paragraphs around it and a line-range locator. It reads
through the run's selector, the sealed-read boundary and the document selector: whoever may
not read it now gets the same 404 as a made-up id."""

import html
import re

import pytest
from django.test import Client

from answers.models import AnswerRun
from knowledge.erasure import revision_erase
from knowledge.lifecycle import document_withdraw
from knowledge.services import space_member_remove
from tests.answers.helpers import ask, ingest
from tests.answers.providers import ScriptedProvider
from tests.answers.test_permissions import plan, select_first
from tests.knowledge.test_documents import pdf_bytes

pytestmark = pytest.mark.django_db

TEXT = (
    "Operations handbook\n\n"
    "This handbook is for every team.\nIt is read once a year.\n\n"
    "The platform operations team owns service reviews.\n\n"
    "Invoices go to the finance office.\n"
)


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def answered(space, owner, member) -> dict:
    document = ingest(owner, space, "handbook.txt", TEXT).document
    body = ask(
        member, "Who owns service reviews?", provider=ScriptedProvider([select_first], plan=plan())
    )
    assert body["evidence"]["answer_status"] == "evidence_backed"
    citation = body["answer"]["citations"][0]
    run = AnswerRun.objects.get(pk=body["run_id"])
    url = f"/runs/{run.pk}/sources/{body['generation']}/{citation['number']}/"
    return {"document": document, "run": run, "citation": citation, "url": url}


def test_a_citation_opens_its_quote_marked_inside_the_text(answered, member):
    conversation = browser(member).get(f"/c/{answered['run'].conversation_id}/")
    assert answered["url"] in conversation.content.decode()  # the answer links it
    page = browser(member).get(answered["url"])
    assert page.status_code == 200
    content = page.content.decode()
    quote = answered["citation"]["quote"]
    marked = re.search(r"<mark data-quote>(.*?)</mark>", content, re.S)
    assert marked and html.unescape(marked.group(1)) == quote
    assert "The platform operations team owns service reviews." in quote
    assert "It is read once a year." in content  # the paragraph before it
    start = TEXT.index(quote)
    first = TEXT.count("\n", 0, start) + 1
    last = TEXT.count("\n", 0, start + len(quote) - 1) + 1
    expected = f"line {first}" if first == last else f"lines {first}–{last}"
    assert expected in content
    assert "handbook" in content and "current" in content


def lines_of(text: str, quote: str) -> str:
    start = text.index(quote)
    first = text.count("\n", 0, start) + 1
    last = text.count("\n", 0, start + len(quote) - 1) + 1
    return f"line {first}" if first == last else f"lines {first}–{last}"


def caption(page: str) -> str:
    return re.sub(r"\s+", " ", page.split("<figcaption>", 1)[1].split("</figcaption>", 1)[0])


def test_a_plain_text_citation_shows_its_line_range_in_the_chat_and_the_receipt(answered, member):
    expected = lines_of(TEXT, answered["citation"]["quote"])
    run = answered["run"]
    conversation = browser(member).get(f"/c/{run.conversation_id}/").content.decode()
    assert f", {expected}" in caption(conversation)
    receipt = browser(member).get(f"/runs/{run.pk}/receipt/1/").content.decode()
    assert expected in receipt


def test_a_markdown_citation_shows_its_headings_and_line_range(space, owner, member):
    text = "# Handbook\n\nRead it once a year.\n\n## Reviews\n\n" + TEXT.split("\n\n")[2]
    ingest(owner, space, "handbook.md", text)
    body = ask(
        member, "Who owns service reviews?", provider=ScriptedProvider([select_first], plan=plan())
    )
    citation = body["answer"]["citations"][0]
    run = AnswerRun.objects.get(pk=body["run_id"])
    page = browser(member).get(f"/c/{run.conversation_id}/").content.decode()
    shown = html.unescape(caption(page))
    assert f"Handbook › Reviews, {lines_of(text, citation['quote'])}" in shown


def test_whoever_may_not_read_it_gets_the_same_404_as_a_made_up_id(
    answered, space, owner, member, outsider
):
    run, url = answered["run"], answered["url"]
    generation, number = 1, answered["citation"]["number"]
    assert browser(outsider).get(url).status_code == 404  # not their run
    assert browser(owner).get(url).status_code == 404  # the curator did not ask it
    made_up = (
        "/runs/00000000-0000-0000-0000-000000000000/sources/1/1/",
        f"/runs/{run.pk}/sources/{generation}/99/",
        f"/runs/{run.pk}/sources/7/1/",
        f"/runs/not-a-uuid/sources/1/{number}/",
    )
    for path in made_up:
        assert browser(member).get(path).status_code == 404, path
    assert Client().get(url).status_code == 302  # to the login page
    space_member_remove(space=space, username=member.username)
    assert browser(member).get(url).status_code == 404


def test_a_withdrawn_source_is_not_opened(answered, owner, member):
    document_withdraw(user=owner, document=answered["document"], reason="outdated")
    assert browser(member).get(answered["url"]).status_code == 404


def test_an_answer_whose_source_was_withdrawn_says_so_not_no_answer_found(answered, owner, member):
    conversation = f"/c/{answered['run'].conversation_id}/"
    document_withdraw(user=owner, document=answered["document"], reason="outdated")
    page = browser(member).get(conversation).content.decode()
    assert 'data-notice="source_withdrawn"' in page and "Source withdrawn" in page
    assert "No answer found" not in page
    fragment = browser(member).get(f"/runs/{answered['run'].pk}/answer/").content.decode()
    assert "Source withdrawn" in fragment and "No answer found" not in fragment


def test_a_model_planning_then_selecting_is_one_activity_row(answered, member):
    page = browser(member).get(f"/c/{answered['run'].conversation_id}/").content.decode()
    log = page.split("data-activity-log", 1)[1].split("</details>", 1)[0]
    assert log.count('data-step="model"') == 1  # the provider here stands in for a model
    assert log.index('data-step="model"') > log.index("data-tool=")  # where last entered


def test_an_answer_whose_source_was_erased_says_so(answered, owner, member):
    revision = answered["document"].revisions.get()
    revision_erase(user=owner, document=answered["document"], revision=revision, reason="leak")
    page = browser(member).get(f"/c/{answered['run'].conversation_id}/").content.decode()
    assert 'data-notice="source_erased"' in page and "Source erased" in page
    assert "No answer found" not in page


def test_a_context_cut_inside_a_long_paragraph_starts_and_ends_on_whole_words():
    from chat.sources import CONTEXT_CHARS, _paragraphs_back, _paragraphs_forward

    words = " ".join(f"word{n:04d}" for n in range(2000))  # no paragraph break to stop at
    quote = "The platform operations team owns service reviews."
    text = f"{words} {quote} {words}"
    start = text.index(quote)
    end = start + len(quote)
    for shift in range(9):  # wherever the limit falls, in a word or on a space
        cut = text[shift:]
        at, was_cut = _paragraphs_back(cut, start - shift)
        assert was_cut and cut[at - 1] == " " and cut[at : at + 4] == "word", shift
        assert start - shift - at <= CONTEXT_CHARS
        until, was_cut = _paragraphs_forward(cut, end - shift)
        assert was_cut and cut[until] == " " and cut[until - 8 : until - 4] == "word", shift
        assert until - (end - shift) <= CONTEXT_CHARS
    # A paragraph break within reach is where the context stops, without an ellipsis.
    short = f"First paragraph.\n\n{quote}\n\nLast paragraph."
    assert _paragraphs_back(short, short.index(quote)) == (0, False)
    assert _paragraphs_forward(short, short.index(quote) + len(quote)) == (len(short), False)


def shared_with(run: AnswerRun, owner_user, username: str) -> None:
    from conversations.services import share_create

    share_create(user=owner_user, conversation=run.conversation, username=username)


def test_the_permission_matrix_of_the_source_view(answered, space, owner, member, outsider):
    """Owner: yes. A reader the conversation is shared with: yes while they may read the
    source. Outsider (even when shared with): 404, as a made-up id is."""
    run, url = answered["run"], answered["url"]
    assert browser(member).get(url).status_code == 200  # the asker
    assert browser(owner).get(url).status_code == 404  # not shared with the curator yet
    shared_with(run, member, owner.username)
    page = browser(owner).get(url)  # the curator reads the space: the shared answer opens
    assert page.status_code == 200 and "<mark data-quote>" in page.content.decode()
    conversation = browser(owner).get(f"/c/{run.conversation_id}/").content.decode()
    assert answered["url"] in conversation and "data-shared-notice" in conversation
    assert "data-regenerate" not in conversation and 'id="ask-form"' not in conversation
    assert browser(owner).post(f"/c/{run.conversation_id}/", {"query": "x"}).status_code == 404
    shared_with(run, member, outsider.username)
    assert browser(outsider).get(url).status_code == 404  # shared, but no access to the space
    made_up = f"/runs/{run.pk}/sources/1/42/"
    assert browser(owner).get(made_up).status_code == 404
    assert browser(member).get(made_up).status_code == 404


WRAPPED = (
    "Shipping guide\n\n"
    "Parcels leave the warehouse\nevery weekday at noon and reach\nmost cities the next day.\n\n"
    "- item one\n- item two\n"
)


def select_parcels(candidates):
    return {"facts": [{"fact_id": next(c.fact_id for c in candidates if "Parcels" in c.text)}]}


def test_a_hard_wrapped_quote_is_reflowed_for_reading_and_located_by_its_lines(
    space, owner, member
):
    from answers.pipeline.vocabulary import Plan

    ingest(owner, space, "shipping.txt", WRAPPED)
    question = "When do parcels leave the warehouse?"
    asked = Plan(standalone=question, searches=[question])
    body = ask(member, question, provider=ScriptedProvider([select_parcels], plan=asked))
    citation = body["answer"]["citations"][0]
    assert "\n" in citation["quote"]  # the sealed quote keeps the file's line breaks
    url = f"/runs/{body['run_id']}/sources/{body['generation']}/{citation['number']}/"
    content = browser(member).get(url).content.decode()
    marked = html.unescape(re.search(r"<mark data-quote>(.*?)</mark>", content, re.S).group(1))
    assert marked == " ".join(citation["quote"].split("\n"))  # joined for display only
    start = WRAPPED.index(citation["quote"])
    first = WRAPPED.count("\n", 0, start) + 1
    last = WRAPPED.count("\n", 0, start + len(citation["quote"]) - 1) + 1
    assert first < last and f"lines {first}–{last}" in content
    assert "- item one\n- item two" in html.unescape(content)  # list items keep their lines
    run = AnswerRun.objects.get(pk=body["run_id"])
    assert run.response["answer"]["citations"][0]["quote"] == citation["quote"]  # unchanged


def marked_pixels(png: bytes) -> int:
    """Pixels of the translucent yellow mark over white paper."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in image.getdata() if r > 240 and 220 < g < 250 and 120 < b < 200)


def test_a_pdf_citation_shows_its_page_as_an_image_with_the_quote_marked(
    space, owner, member, outsider
):
    from knowledge.documents.extraction import revision_extract
    from knowledge.documents.upload import document_upload

    pages = [
        "The canteen opens at seven in the morning and closes at three.",
        "The platform operations team owns service reviews.",
    ]
    result = document_upload(
        user=owner, filename="handbook.pdf", data=pdf_bytes(pages), space=space
    )
    revision_extract(revision_id=result.revision.pk)
    body = ask(
        member, "Who owns service reviews?", provider=ScriptedProvider([select_first], plan=plan())
    )
    citation = body["answer"]["citations"][0]
    assert citation["locator"]["page"] == 2
    base = f"/runs/{body['run_id']}/sources/{body['generation']}/{citation['number']}/"
    content = browser(member).get(base).content.decode()
    assert f'src="{base}page.png"' in content and "page 2" in content
    image = browser(member).get(base + "page.png")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    assert image["Cache-Control"] == "private, no-store"
    assert image.content.startswith(b"\x89PNG") and marked_pixels(image.content) > 500
    # The same page without a quote on it has no mark: the mark is the quote's.
    from chat.page_image import page_png

    with result.revision.file.open("rb") as stored:
        data = stored.read()
    assert marked_pixels(page_png(data=data, page=1, quote=citation["quote"])) == 0
    assert browser(outsider).get(base + "page.png").status_code == 404
    assert (
        browser(member).get(base.replace(f"/{citation['number']}/", "/9/") + "page.png").status_code
        == 404
    )


def test_a_text_citation_has_no_page_image(answered, member):
    content = browser(member).get(answered["url"]).content.decode()
    assert "data-page-image" not in content
    assert browser(member).get(answered["url"] + "page.png").status_code == 404
