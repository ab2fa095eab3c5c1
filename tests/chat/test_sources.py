"""The source view (issue 29, first step): a citation opens its quotation inside the text it
was checked against, with the paragraphs around it and a line-range locator. It reads
through the run's selector, the sealed-read boundary and the document selector: whoever may
not read it now gets the same 404 as a made-up id."""

import html
import re

import pytest
from django.test import Client

from answers.models import AnswerRun
from knowledge.lifecycle import document_withdraw
from knowledge.services import space_member_remove
from tests.answers.conftest import ask, ingest
from tests.answers.providers import ScriptedProvider
from tests.answers.test_permissions import plan, select_first

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
    body = ask(member, "Who owns service reviews?",
               provider=ScriptedProvider([select_first], plan=plan()))  # fmt: skip
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


def test_whoever_may_not_read_it_gets_the_same_404_as_a_made_up_id(
    answered, space, owner, member, outsider
):
    run, url = answered["run"], answered["url"]
    generation, number = 1, answered["citation"]["number"]
    assert browser(outsider).get(url).status_code == 404  # not their run
    assert browser(owner).get(url).status_code == 404  # the curator did not ask it
    made_up = ("/runs/00000000-0000-0000-0000-000000000000/sources/1/1/",
               f"/runs/{run.pk}/sources/{generation}/99/", f"/runs/{run.pk}/sources/7/1/",
               f"/runs/not-a-uuid/sources/1/{number}/")  # fmt: skip
    for path in made_up:
        assert browser(member).get(path).status_code == 404, path
    assert Client().get(url).status_code == 302  # to the login page
    space_member_remove(space=space, username=member.username)
    assert browser(member).get(url).status_code == 404


def test_a_withdrawn_source_is_not_opened(answered, owner, member):
    document_withdraw(user=owner, document=answered["document"], reason="outdated")
    assert browser(member).get(answered["url"]).status_code == 404
