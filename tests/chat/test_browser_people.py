"""The chat for people (issue 29) in a real browser: Playwright drives Debian's Chromium
against the suite's live Daphne and Celery worker, with the demo data. Screenshots go to
var/test/screenshots/ (29-*.png).

Playwright's sync API runs an event loop in the test's thread, where Django refuses the
ORM: database work runs in a thread of its own (`orm`)."""

import re
import threading
from collections.abc import Callable

import pytest
from django.db import connection
from playwright.sync_api import expect

from tests.answers.fake_llm import FakeModelServer, Reply
from tests.answers.test_openai_provider import model, provider_for, span_of, step
from tests.chat.helpers import wait_for
from tests.chat.test_browser import QUESTION, QUOTE, new_page, shot, sign_in
from tests.knowledge.test_documents import pdf_bytes

pytestmark = pytest.mark.django_db(transaction=True)


def orm(work: Callable[[], object]) -> object:
    """Run ORM work outside Playwright's event loop thread; its result or its exception."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(300)
    assert not thread.is_alive(), "ORM work did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def ask_demo(page, question: str = QUESTION) -> None:
    """From the home page: the Demo space checked, the question asked, its answer shown."""
    page.get_by_label("Demo").check()
    page.get_by_role("textbox", name="Your question").fill(question)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("[data-answer]").first).to_be_visible()


def ask_again(page, count: int) -> None:
    """In the open conversation: the question once more, until `count` answers show."""
    page.get_by_role("textbox", name="Your question").fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("[data-answer]")).to_have_count(count)


def test_a_citation_opens_the_highlighted_passage_and_a_pdf_page_and_lost_access_is_404(
    browser, live_server_url, demo, tmp_path
):
    page = new_page(browser)
    sign_in(page, live_server_url, "reader")
    ask_demo(page)
    answer = page.locator("[data-answer]").first
    badge = answer.locator("[data-verified]")
    expect(badge).to_have_text("Quoted word for word · judged to answer")
    expect(answer.locator("[data-judged]").first).to_have_text(
        re.compile(r"^· judged to answer: (0\.\d\d|1\.00)$")
    )
    expect(answer.locator("[data-answer-number]")).to_have_count(0)  # no regenerate yet
    answer.locator("[data-open-source]").first.click()
    expect(page.locator("[data-quote]")).to_have_text(QUOTE)
    expect(page.locator("[data-source-title]")).to_contain_text("operations")
    expect(page.locator("[data-source-lines]")).to_have_text(re.compile(r"^lines? \d+(–\d+)?$"))
    shot(page, "29-source-text")
    source_url = page.url

    # A PDF: the page is shown as an image with the quote's lines marked.
    handbook = tmp_path / "crane-handbook.pdf"
    handbook.write_bytes(
        pdf_bytes(
            [
                "The canteen opens at seven in the morning.",
                "The harbour crane is inspected every Tuesday by the dock master.",
            ]
        )
    )
    page.goto(live_server_url + "/")
    page.get_by_label("Upload a private file (only you can see it)").set_input_files(handbook)
    page.get_by_role("button", name="Upload", exact=True).click()
    row = page.locator("label.file", has_text="crane-handbook")
    expect(row.locator("[data-file-state]")).to_have_attribute("data-file-state", "admitted")
    row.locator("input").check()
    page.get_by_role("textbox", name="Your question").fill("Who inspects the harbour crane?")
    page.get_by_role("button", name="Ask", exact=True).click()
    quote = page.locator("[data-answer] blockquote").first
    expect(quote).to_contain_text("inspected every Tuesday")
    page.locator("[data-open-source]").first.click()
    expect(page.locator("[data-quote]")).to_contain_text("inspected every Tuesday")
    image = page.locator("[data-page-image] img")
    expect(image).to_be_visible()
    image.scroll_into_view_if_needed()
    loaded = "() => document.querySelector('[data-page-image] img').naturalWidth"
    wait_for(lambda: page.evaluate(loaded) > 0)  # the PNG arrived and decoded
    assert "page 2" in page.locator(".meta").inner_text()
    shot(page, "29-source-pdf-page")
    assert page.console_errors == []

    # The reader loses access to the Demo space: the same link is now the 404 of a made-up id.
    def remove() -> None:
        from knowledge.models import Space
        from knowledge.services import space_member_remove

        space_member_remove(space=Space.objects.get(name="Demo"), username="reader")

    orm(remove)
    response = page.goto(source_url)
    assert response.status == 404
    lost = page.locator("body").inner_text()
    shot(page, "29-source-lost-access")
    made_up = page.goto(re.sub(r"/sources/\d+/\d+/$", "/sources/1/77/", source_url))
    assert made_up.status == 404 and page.locator("body").inner_text() == lost


def test_conversations_are_renamed_searched_deleted_and_api_ones_hidden_by_default(
    browser, live_server_url, demo
):
    def api_conversation() -> int:
        from django.contrib.auth import get_user_model

        from answers.models import Conversation
        from conversations.services import conversation_create

        reader = get_user_model().objects.get(username="reader")
        made = conversation_create(
            user=reader, title="Made by a script", origin=Conversation.Origin.API
        )
        return made.pk

    from_api = orm(api_conversation)
    page = new_page(browser)
    sign_in(page, live_server_url, "reader")
    sidebar = page.locator("[data-conversation-list]")
    expect(sidebar).not_to_contain_text("Made by a script")
    ask_demo(page)

    # Rename.
    page.get_by_text("Rename or delete").click()
    page.get_by_label("Title", exact=True).fill("Who runs the service reviews")
    page.get_by_role("button", name="Rename", exact=True).click()
    expect(page.locator("[data-conversation-title]")).to_have_text("Who runs the service reviews")
    expect(sidebar).to_contain_text("Who runs the service reviews")
    page.goto(live_server_url + "/")
    ask_demo(page, "Where do invoices go?")

    # Search by words of the questions.
    page.get_by_label("Find a conversation").fill("service reviews")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(sidebar.locator("li[data-conversation]")).to_have_count(1)
    expect(sidebar).to_contain_text("Who runs the service reviews")
    shot(page, "29-search")

    # API-made conversations: one click shows them, marked.
    page.get_by_label("Find a conversation").fill("")
    page.get_by_role("button", name="Search", exact=True).click()
    page.get_by_role("link", name="Also show conversations from the API, MCP and clients").click()
    api_row = sidebar.locator(f"li[data-conversation='{from_api}']")
    expect(api_row).to_contain_text("Made by a script")
    expect(api_row.locator("[data-origin]")).to_have_text("API")
    shot(page, "29-every-origin")

    # Delete: gone from the list.
    sidebar.get_by_role("link", name="Who runs the service reviews").click()
    page.get_by_text("Rename or delete").click()
    page.get_by_role("button", name="Delete conversation").click()
    expect(page.get_by_role("heading", name="Ask your library")).to_be_visible()
    expect(page.locator("[data-conversation-list]")).not_to_contain_text("service reviews")
    expect(page.locator(".messages")).to_contain_text("Conversation deleted")
    shot(page, "29-deleted")
    assert page.console_errors == []


def test_the_model_step_shows_while_a_slow_model_answers_and_the_activity_survives_a_reload(
    browser, live_server_url, demo
):
    """A fake OpenAI-compatible model over real HTTP, holding its selection reply until the
    test has seen the page say it waits for the model. The run executes in this process (in
    a thread, with the Channels sink), as the worker would."""
    released = threading.Event()
    fast = model(select=[lambda request: {"facts": [span_of(request, QUOTE)]}])

    def slow(request: dict) -> Reply:
        reply = fast(request)
        if step(request) == "select":
            reply.stall = released
        return reply

    fake = FakeModelServer(replies=[slow]).start()

    def start() -> tuple[str, int]:
        from django.contrib.auth import get_user_model

        from answers.models import Conversation
        from answers.pipeline.lifecycle import run_start
        from answers.pipeline.request import answer_request_parse
        from knowledge.models import Space

        reader = get_user_model().objects.get(username="reader")
        demo_space = Space.objects.get(name="Demo")
        request = answer_request_parse({"query": QUESTION, "space_ids": [demo_space.pk]})
        run = run_start(user=reader, request=request, origin=Conversation.Origin.CHAT)
        return str(run.pk), run.conversation_id

    run_id, conversation_id = orm(start)
    page = new_page(browser)
    sign_in(page, live_server_url, "reader")
    page.goto(f"{live_server_url}/c/{conversation_id}/?live={run_id}")
    expect(page.locator("[data-activity-status]")).to_be_visible()

    def execute() -> None:
        from answers.pipeline.events import ChannelsSink
        from answers.pipeline.lifecycle import run_execute

        try:
            run_execute(
                run_id=run_id,
                generation=1,
                provider=provider_for(fake, timeout=120),
                events=ChannelsSink(),
            )
        finally:
            connection.close()

    runner = threading.Thread(target=execute)
    runner.start()
    try:
        waiting = page.locator("[data-tools] li[data-step='model'][data-state='running']")
        expect(waiting).to_have_count(1)
        # Planning waited for the model too: one row, moved to where it was last entered.
        expect(page.locator("[data-tools] li[data-step='model']")).to_have_count(1)
        expect(page.locator("[data-tools] li[data-tool='keyword_search']")).to_have_attribute(
            "data-state", "succeeded"
        )  # the tools are done: this is the model selecting, not planning
        expect(page.locator("[data-activity-status]")).to_have_text("Waiting for the model…")
        assert not released.is_set() and page.locator("[data-answer]").count() == 0
        shot(page, "29-waiting-for-the-model")
    finally:
        released.set()
        runner.join(300)
        fake.stop()
    expect(page.locator("[data-answer] blockquote").first).to_contain_text(QUOTE)
    log = page.locator("[data-activity-log]")
    expect(log.locator("li[data-step='model']").first).to_have_text("Waiting for the model")

    page.reload()
    log = page.locator("[data-activity-log]")
    log.locator("summary").click()
    expect(log.locator("li[data-tool='keyword_search']")).to_have_text(
        re.compile(r"^Searching by words · done · \d+ found$")
    )
    expect(log.locator("li[data-step='judge']").first).to_have_text(
        "Judging whether the quotes answer"
    )
    shot(page, "29-activity-after-reload")
    assert page.console_errors == []


def test_the_layout_keeps_the_question_box_in_view_and_fits_a_phone(browser, live_server_url, demo):
    page = new_page(browser)
    page.set_viewport_size({"width": 1280, "height": 800})
    sign_in(page, live_server_url, "reader")
    ask_demo(page)
    for count in (2, 3, 4):
        ask_again(page, count)
    assert page.evaluate("document.documentElement.scrollHeight") > 800  # a long page
    # Wide: the conversation list is a sidebar beside the messages.
    page.evaluate("window.scrollTo(0, 0)")
    sidebar = page.locator("aside.sidebar").bounding_box()
    main = page.locator(".chat-main").bounding_box()
    assert sidebar["x"] + sidebar["width"] <= main["x"] and abs(sidebar["y"] - main["y"]) < 50
    # The question box stays at the bottom of the viewport; the sources panel is folded.
    box = page.locator("[data-ask-form]").bounding_box()
    assert box["y"] + box["height"] <= 800 + 1
    assert page.locator("[data-sources-panel]").get_attribute("open") is None
    expect(page.locator("[data-sources-summary]")).to_have_text("Demo")
    shot(page, "29-wide")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    box = page.locator("[data-ask-form]").bounding_box()
    assert box["y"] + box["height"] <= 844 + 1
    shot(page, "29-phone")
    assert page.console_errors == []
