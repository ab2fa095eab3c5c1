"""Conversations people can manage (issue 29): the list shows the chat's own by default
(those started through the API, a client, MCP or the CLI are marked and one click away),
rename, delete (gone for its owner and its readers; the sealed records stay and the
receipt stays readable through the API), search by the questions' words; the activity of
a finished answer read back from its stored events; plain words on the answer and the
receipt."""

import re

import pytest
from django.test import Client

from answers.models import AnswerRun, Conversation
from audit.models import AnswerAudit, OutputRelease
from conversations.services import share_create
from core.services import api_key_create
from tests.answers.helpers import ingest
from tests.chat.test_views import QUESTION, TEXT, ask, browser

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(space, owner):
    return ingest(owner, space, "operations.txt", TEXT)


def api(user, agent: str = "curl/8") -> Client:
    secret = api_key_create(user=user).secret
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_USER_AGENT=agent)


def api_answer(client: Client, query: str = QUESTION) -> dict:
    response = client.post("/v1/answer", {"query": query}, content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    return response.json()


def listed(client: Client, query: str = "") -> list[int]:
    page = client.get("/" + query).content.decode()
    block = page.split("data-conversation-list", 1)[1].split("</ul>", 1)[0]
    return [int(pk) for pk in re.findall(r'data-conversation="(\d+)"', block)]


def test_conversations_are_marked_by_origin_and_the_list_shows_the_chats_by_default(corpus, member):
    _, chat_run = ask(browser(member))
    from_api = api_answer(api(member))
    from_client = api_answer(api(member, agent="koinon-client/0.1"))
    created = (
        api(member)
        .post("/v1/conversations", {"title": "Planning"}, content_type="application/json")
        .json()
    )
    origin = {
        pk: Conversation.objects.get(pk=pk).origin
        for pk in (
            AnswerRun.objects.get(pk=chat_run).conversation_id,
            AnswerRun.objects.get(pk=from_api["run_id"]).conversation_id,
            AnswerRun.objects.get(pk=from_client["run_id"]).conversation_id,
            created["id"],
        )
    }
    assert list(origin.values()) == ["chat", "api", "client", "api"]
    assert created["origin"] == "api"
    chat_id = AnswerRun.objects.get(pk=chat_run).conversation_id
    client = browser(member)
    assert listed(client) == [chat_id]  # API-made conversations are not in the way
    every = listed(client, "?origin=all")
    assert sorted(every) == sorted(origin) and every == sorted(every, reverse=True)
    page = client.get("/?origin=all").content.decode()
    assert page.count('data-origin="api"') == 2 and page.count('data-origin="client"') == 1
    assert 'data-origin="chat"' not in page  # the chat's own need no mark
    assert "Also show conversations from the API" in client.get("/").content.decode()


def test_mcp_and_cli_conversations_are_marked_too(corpus, member):
    from django.core.management import call_command

    from mcp_server.tools import Caller, answer_run

    answer_run(Caller(user=member, api_key=None), {"query": QUESTION})
    call_command("ask", QUESTION, "--user", member.username)
    origins = list(Conversation.objects.filter(user=member).values_list("origin", flat=True))
    assert sorted(origins) == ["cli", "mcp"]


def test_rename_changes_the_title_and_refuses_bad_titles(corpus, member, outsider):
    _, run_id = ask(browser(member))
    conversation = AnswerRun.objects.get(pk=run_id).conversation
    client = browser(member)
    response = client.post(f"/c/{conversation.pk}/rename/", {"title": "  Service reviews  "})
    assert response.status_code == 302
    conversation.refresh_from_db()
    assert conversation.title == "Service reviews"
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "<h1 data-conversation-title>Service reviews</h1>" in page
    for bad in ["", "   ", "x" * 201, "two\nlines", "nul\x00byte"]:
        response = client.post(f"/c/{conversation.pk}/rename/", {"title": bad}, follow=True)
        assert response.status_code == 200
        assert 'class="error"' in response.content.decode(), repr(bad)
        conversation.refresh_from_db()
        assert conversation.title == "Service reviews", repr(bad)
    foreign = browser(outsider).post(f"/c/{conversation.pk}/rename/", {"title": "Mine"})
    assert foreign.status_code == 404
    assert browser(member).post("/c/999999/rename/", {"title": "x"}).status_code == 404
    conversation.refresh_from_db()
    assert conversation.title == "Service reviews"


def test_delete_hides_the_conversation_and_keeps_the_sealed_records(corpus, member, owner):
    _, run_id = ask(browser(member))
    run = AnswerRun.objects.get(pk=run_id)
    conversation = run.conversation
    share_create(user=member, conversation=conversation, username=owner.username)
    release = OutputRelease.objects.get(run=run)
    key = api(member)
    assert browser(outsider_free := owner).get(f"/c/{conversation.pk}/").status_code == 200

    assert browser(owner).post(f"/c/{conversation.pk}/delete/").status_code == 404  # not his
    response = browser(member).post(f"/c/{conversation.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert conversation.pk not in listed(browser(member), "?origin=all")
    assert browser(member).get(f"/c/{conversation.pk}/").status_code == 404
    assert browser(outsider_free).get(f"/c/{conversation.pk}/").status_code == 404  # shares end
    assert key.get(f"/v1/conversations/{conversation.pk}").status_code == 404
    assert conversation.pk not in [c["id"] for c in key.get("/v1/conversations").json()["results"]]
    # Asking into it is refused as for any conversation one cannot see.
    refused = key.post(
        "/v1/answer",
        {"query": QUESTION, "conversation_id": conversation.pk},
        content_type="application/json",
    )
    assert refused.status_code == 404
    # The sealed records stay; the receipt is readable by its owner through the API.
    assert OutputRelease.objects.filter(pk=release.pk).exists()
    assert AnswerAudit.objects.filter(run=run).exists()
    detail = key.get(f"/v1/runs/{run.pk}")
    assert detail.status_code == 200 and detail.json()["release"]["id"] == str(release.pk)
    assert key.get(f"/v1/runs/{run.pk}/audit").status_code == 200
    assert api(owner).get(f"/v1/runs/{run.pk}").status_code == 404


def test_the_api_renames_and_deletes_with_typed_errors(corpus, member, outsider):
    from_api = api_answer(api(member))
    pk = AnswerRun.objects.get(pk=from_api["run_id"]).conversation_id
    key = api(member)
    url = f"/v1/conversations/{pk}"
    renamed = key.patch(url, {"title": "Reviews"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["title"] == "Reviews"
    for bad in [
        {},
        {"title": ""},
        {"title": "x" * 201},
        {"title": "a\nb"},
        {"title": 5},
        {"title": "ok", "extra": 1},
        [],
    ]:
        response = key.patch(url, bad, content_type="application/json")
        assert response.status_code == 422, (bad, response.content)
        assert response.json()["error"]["code"] in {"invalid", "validation_error"}
    broken = key.patch(url, "{", content_type="application/json")
    assert broken.status_code in {400, 422} and "error" in broken.json()
    assert (
        api(outsider).patch(url, {"title": "x"}, content_type="application/json").status_code == 404
    )
    assert api(outsider).delete(url).status_code == 404
    assert key.delete("/v1/conversations/not-an-id").status_code == 404
    assert key.delete(url).status_code == 204
    assert key.delete(url).status_code == 404
    assert key.get(url).status_code == 404
    assert Conversation.objects.get(pk=pk).title == "Reviews"


def test_search_finds_conversations_by_the_words_of_their_questions(corpus, member, outsider):
    client = browser(member)
    _, reviews = ask(client)
    _, invoices = ask(client, "Where do invoices go?")
    reviews_id = AnswerRun.objects.get(pk=reviews).conversation_id
    invoices_id = AnswerRun.objects.get(pk=invoices).conversation_id
    assert listed(client, "?q=REVIEWS") == [reviews_id]
    assert listed(client, "?q=invoices+go") == [invoices_id]
    assert listed(client, "?q=invoices+reviews") == []
    assert "No conversation has these words" in client.get("/?q=zebra").content.decode()
    assert listed(browser(outsider), "?q=reviews") == []  # only one's own
    for odd in ["%00", "%00%00%00", "reviews%00", "%E2%80%AE"]:  # odd input is no match
        response = client.get("/?q=" + odd)
        assert response.status_code == 200 and listed(client, "?q=" + odd) == [], odd
    assert client.get("/?q=" + "a" * 5000).status_code == 200


def test_the_activity_of_a_finished_answer_is_read_back_after_a_reload(corpus, member):
    page, run_id = ask(browser(member))
    page = browser(member).get(f"/c/{AnswerRun.objects.get(pk=run_id).conversation_id}/")
    content = page.content.decode()
    log = content.split("data-activity-log", 1)[1].split("</details>", 1)[0]
    assert re.search(
        r'data-tool="keyword_search" data-state="succeeded">'
        r"Searching by words · done · \d+ found<",
        log,
    )
    assert 'data-tool="vector_search"' in log and "Searching by meaning" in log
    # The default provider has no model: no waiting for one, and each step named once.
    assert "Waiting for the model" not in log and 'data-step="model"' not in log
    for step, words in [
        ("plan", "Planning the searches"),
        ("select", "Choosing the quotes"),
        ("verify", "Checking quotes against the source"),
        ("judge", "Judging whether the quotes answer"),
    ]:
        assert log.count(f'data-step="{step}" data-state="succeeded">{words}<') == 1, step


def test_plain_words_on_the_answer_and_answer_n_of_m_only_after_a_regenerate(corpus, member):
    client = browser(member)
    page, run_id = ask(client)
    shown = re.sub(r"<[^>]+>", " ", page.split("<main", 1)[1])  # the words on the page
    assert "Quoted word for word · judged to answer" in shown and "sealed" not in shown
    assert "Verified answer" not in shown
    assert "generation" not in shown.lower()
    assert "data-answer-number" not in page
    client.post(f"/runs/{run_id}/regenerate/")
    page = client.get(f"/c/{AnswerRun.objects.get(pk=run_id).conversation_id}/").content.decode()
    assert "Answer 2 of 2" in page and "1 earlier answer" in page


def test_an_abstention_says_its_hint_once(corpus, member):
    page, _ = ask(browser(member), "What colour is the moon rover?")
    assert page.count("select another source") == 1


def test_the_receipt_starts_with_a_summary_for_people(corpus, member):
    client = browser(member)
    _, run_id = ask(client)
    page = client.get(f"/runs/{run_id}/receipt/1/").content.decode()
    summary = page.split("data-receipt-summary", 1)[1].split("</section>", 1)[0]
    assert "found word for word" in summary and "operations" in summary
    assert f'href="/runs/{run_id}/sources/1/1/"' in summary  # the citation opens its source
    assert page.index("data-receipt-summary") < page.index("data-hash=")
    assert "docs/releases.md" not in page and "rfc8785.dumps(x)" in page
    assert "Reset context" not in page and "(document " not in page
