"""The chat in a real browser (issue 12): Playwright drives Debian's Chromium against the
suite's live Daphne and Celery worker, with the demo data. Each step leaves a screenshot
under var/test/screenshots/; docs/chat.png and docs/receipt.png are copies of
04-answer.png and 05-receipt.png (copied by hand, so a test run never changes docs/)."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from tests.chat.helpers import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Who owns service reviews?"
QUOTE = "The platform operations team owns service reviews."
SCREENSHOTS = settings.DATA_DIR / "screenshots"
SEEN_STATES = """
window.koinonSeen = [];
window.koinonSteps = [];
window.koinonLiveRows = 0;
new MutationObserver(function () {
  // Each step row's words, and the most rows any one step had at once.
  document.querySelectorAll("[data-tools] li[data-step]").forEach(function (li) {
    const rows = document.querySelectorAll(
      "[data-tools] li[data-step='" + li.dataset.step + "']").length;
    window.koinonSteps.push([li.dataset.step, li.textContent, rows]);
  });
  // Rows of the live list ([data-tools]); the run may seal before a poll of the page sees them.
  window.koinonLiveRows = Math.max(
    window.koinonLiveRows, document.querySelectorAll("[data-tools] li").length);
  document.querySelectorAll("li[data-tool]").forEach(function (li) {
    const pair = [li.dataset.tool, li.dataset.state];
    if (!window.koinonSeen.some(function (p) { return p[0] === pair[0] && p[1] === pair[1]; })) {
      window.koinonSeen.push(pair);
    }
  });
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""


def shot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Page, url: str, username: str) -> None:
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Ask your library")).to_be_visible()


def new_page(browser: Browser, **options) -> Page:
    context = browser.new_context(viewport={"width": 1000, "height": 900}, **options)
    page = context.new_page()
    page.set_default_timeout(60_000)
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("response", lambda response: response.status >= 400 and errors.append(response.url))
    page.console_errors = errors  # CSP violations are reported as console errors
    return page


def test_a_reader_asks_watches_the_tools_reads_the_receipt_regenerates_and_switches_language(
    browser, live_server_url, demo
):
    page = new_page(browser)
    # Every state a tool row of the activity takes, as the page shows it.
    page.add_init_script(SEEN_STATES)
    page.goto(live_server_url + "/")
    assert "/login/" in page.url
    shot(page, "01-login")
    sign_in(page, live_server_url, "reader")
    assert page.locator("[data-admin-link]").count() == 0  # readers get no admin link
    page.get_by_label("Demo").check()
    page.get_by_label("Your question").fill(QUESTION)
    shot(page, "02-question")
    page.get_by_role("button", name="Ask", exact=True).click()

    # Live activity: each tool with its state and count, from the run's event stream; the
    # sealed answer then replaces the activity, which stays folded beneath it. A fast run
    # seals before a poll of the page could see the live list, so the init script's observer
    # records what the list showed.
    answer = page.locator("[data-answer]").first
    expect(answer.locator("blockquote").first).to_contain_text(QUOTE)
    assert page.evaluate("window.koinonLiveRows") >= 1
    caption = answer.locator("figcaption").first
    expect(caption).to_contain_text("operations")
    expect(caption).to_contain_text(re.compile(r"revision 1 of \d{4}-\d\d-\d\d"))
    expect(caption).to_contain_text("Service reviews")  # the heading path
    expect(caption).to_contain_text("current")
    seen = page.evaluate("window.koinonSeen")
    assert ["keyword_search", "running"] in seen and ["keyword_search", "succeeded"] in seen
    # The default provider has no model: its steps are named for what it does, once each.
    steps = page.evaluate("window.koinonSteps")
    assert all(step != "model" and "model" not in text for step, text, _ in steps), steps
    assert all(rows == 1 for _, _, rows in steps), steps
    page.locator("[data-activity-log] summary").click()
    log = page.locator("[data-activity-log] li[data-tool]")
    expect(log.first).to_have_text(
        re.compile(r"^Searching by (meaning|words) · (done · \d+ found|failed|skipped)$")
    )
    assert {item.get_attribute("data-tool") for item in log.all()} >= {"keyword_search"}
    shot(page, "03-activity")
    page.locator("[data-activity-log] summary").click()
    shot(page, "04-answer")

    # The receipt of generation 1.
    page.get_by_role("link", name="Receipt").first.click()
    expect(page.get_by_role("heading", name="Receipt")).to_be_visible()
    expect(page.locator("[data-release-id]")).to_have_text(re.compile(r"[0-9a-f-]{36}"))
    expect(page.locator("[data-hash]")).to_have_count(4)
    for row in page.locator("[data-hash]").all():
        expect(row).to_contain_text("matches")
    expect(page.locator("[data-fact-ids] li").first).to_contain_text(re.compile(r"\w+"))
    expect(page.locator("[data-audit-link]")).to_have_attribute("href", re.compile("/audit$"))
    shot(page, "05-receipt")
    audit_url = live_server_url + page.locator("[data-audit-link]").get_attribute("href")
    audit = page.request.get(audit_url)
    assert audit.status == 200 and audit.json()["generations"][0]["number"] == 1

    # Regenerate: generation 2, and generation 1 stays visible as an earlier one.
    page.get_by_role("link", name="Back to the conversation").click()
    page.get_by_role("button", name="Regenerate").click()
    expect(page.locator("details.earlier summary")).to_have_text("1 earlier answer")
    expect(page.locator("[data-answer][data-generation='2'] [data-answer-number]")).to_have_text(
        "Answer 2 of 2"
    )
    expect(page.locator("[data-answer][data-generation='2']")).to_contain_text(QUOTE)
    page.locator("details.earlier summary").click()
    expect(page.locator("[data-answer][data-generation='1'] blockquote")).to_contain_text(QUOTE)
    shot(page, "06-regenerated")

    # Switch language: the UI (and new answers) in German.
    page.get_by_label("Language").select_option("de")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("button", name="Neu erzeugen")).to_be_visible()
    page.get_by_label("Ihre Frage").fill(QUESTION)
    page.get_by_role("button", name="Fragen", exact=True).click()
    expect(page.locator("[data-answer]").last).to_contain_text("Aus Ihrer Bibliothek:")
    shot(page, "07-german")

    # Phone width: nothing wider than the screen.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "08-phone")
    assert page.console_errors == []


def test_the_outsider_sees_neither_the_space_nor_its_text(browser, live_server_url, demo):
    page = new_page(browser)
    sign_in(page, live_server_url, "outsider")
    expect(page.locator("[data-space]")).to_have_count(0)
    assert "Demo" not in page.content()
    page.get_by_label("Your question").fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    answer = page.locator("[data-answer]").first
    expect(answer).to_contain_text("Not in your library")
    expect(answer).to_contain_text("select another source")
    assert QUOTE not in page.content() and "operations team" not in page.content()
    shot(page, "09-outsider")


def test_without_javascript_the_form_still_yields_the_sealed_answer(browser, live_server_url, demo):
    page = new_page(browser, java_script_enabled=False)
    sign_in(page, live_server_url, "reader")
    page.get_by_label("Demo").check()
    page.get_by_label("Your question").fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("[data-answer] blockquote").first).to_contain_text(QUOTE)
    assert page.locator("[data-live-run]").count() == 0
    shot(page, "10-no-javascript")


def test_a_private_file_uploads_with_progress_until_admitted_or_failed(
    browser, live_server_url, demo, tmp_path
):
    page = new_page(browser)
    sign_in(page, live_server_url, "reader")
    notes = tmp_path / "travel-notes.txt"
    notes.write_text("My private travel budget is 900 euros per trip.")
    page.get_by_label("Upload a private file (only you can see it)").set_input_files(str(notes))
    page.get_by_role("button", name="Upload", exact=True).click()
    status = page.locator("[data-upload-status]")
    expect(status).to_have_text(re.compile(r"^travel-notes: (Extracting text…|Ready)$"))
    # The page reloads once the extraction is done; the file is then in the picker.
    row = page.locator("label.file", has_text="travel-notes")
    expect(row.locator("[data-file-state]")).to_have_attribute("data-file-state", "admitted")
    expect(row).to_contain_text("Ready")
    shot(page, "11-upload-admitted")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nnot really a pdf")
    page.get_by_label("Upload a private file (only you can see it)").set_input_files(str(broken))
    page.get_by_role("button", name="Upload", exact=True).click()
    failed = page.locator("label.file", has_text="broken")
    expect(failed.locator("[data-file-state]")).to_have_attribute("data-file-state", "failed")
    expect(failed).to_contain_text("could not be read")
    shot(page, "12-upload-failed")
    # Asking with the file selected answers from it.
    page.locator("label.file", has_text="travel-notes").locator("input").check()
    page.get_by_label("Your question").fill("What is my travel budget per trip?")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("[data-answer] blockquote").first).to_contain_text("900 euros")


@pytest.fixture
def library_curator(demo) -> None:
    """A curator of the Demo space who is neither staff nor superuser (made before the
    browser starts: the ORM does not run inside Playwright's loop)."""
    from knowledge.models import Space
    from knowledge.services import space_member_set

    get_user_model().objects.create_user("curator", password=PASSWORD)
    space_member_set(space=Space.objects.get(name="Demo"), username="curator", role="curator")


def test_a_curator_adds_two_files_in_the_library_and_a_reader_is_answered_from_one(
    library_curator, browser, live_server_url, tmp_path
):
    """Issue 28: a curator with only a browser adds documents to their space."""
    crane = "The harbour crane is inspected every Tuesday by the dock master."
    (tmp_path / "harbour.md").write_text(f"# Harbour\n\n{crane}\n")
    (tmp_path / "canteen.txt").write_text("The canteen opens at seven in the morning.\n")

    page = new_page(browser)
    sign_in(page, live_server_url, "curator")
    page.get_by_role("link", name="Library").click()
    page.get_by_role("link", name="Demo").click()
    expect(page.get_by_role("heading", name="Demo")).to_be_visible()
    page.get_by_label("Add documents to this space").set_input_files(
        [tmp_path / "harbour.md", tmp_path / "canteen.txt"]
    )
    page.get_by_role("button", name="Upload", exact=True).click()
    # Each file gets its own line with its progress, then the page shows both admitted.
    expect(page.locator("[data-upload-list] li")).to_have_count(2)
    for title in ("Harbour", "canteen"):
        row = page.locator("li[data-document]", has_text=title)
        expect(row).to_have_attribute("data-state", "admitted", timeout=120_000)
        expect(row).to_contain_text("Ready")
    shot(page, "12-library-upload")
    assert page.console_errors == []

    reader = new_page(browser)
    sign_in(reader, live_server_url, "reader")
    reader.get_by_label("Demo").check()
    reader.get_by_label("Your question").fill("Who inspects the harbour crane?")
    reader.get_by_role("button", name="Ask", exact=True).click()
    expect(reader.locator("[data-answer] blockquote").first).to_contain_text(crane)
    shot(reader, "13-answer-from-the-library")
