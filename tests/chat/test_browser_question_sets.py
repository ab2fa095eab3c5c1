"""A space's question set in a real browser (issue 47, item 6): the demo's admin, who curates
every space, uploads a small CSV to the Demo space, asks it through the suite's live worker
(the real pipeline and judge), reads the figures and the curve, and is refused a point below
the policy's floor; the demo's reader, no curator, gets the 404 of a space they cannot see.
Screenshots go to var/test/screenshots/ (47-*.png)."""

import re
import time

import pytest
from playwright.sync_api import expect

from tests.chat.test_browser import new_page, shot, sign_in
from tests.chat.test_browser_people import orm

pytestmark = pytest.mark.django_db(transaction=True)

CSV = (
    b"question,answer\n"
    b"Who owns service reviews?,platform operations team\n"
    b"When are production databases backed up?,02:00 UTC\n"
    b"Who is the chief executive?,\n"
)
# A guard against a hang, not a measured bound: three questions through the whole pipeline
# on a CI machine with 2 cores.
RUN_GUARD_S = 300


def demo_space_id() -> int:
    from knowledge.models import Space

    return Space.objects.get(name="Demo").pk


def test_a_curator_measures_a_space_on_its_questions_and_a_reader_cannot_see_them(
    browser, live_server_url, demo
):
    url = f"{live_server_url}/spaces/{orm(demo_space_id)}/questions/"
    page = new_page(browser)
    sign_in(page, live_server_url, "admin")
    page.goto(url)
    upload = page.locator("[data-question-upload]")
    upload.get_by_label("Name").fill("Handbook")
    upload.get_by_label("CSV or JSONL file").set_input_files(
        {"name": "questions.csv", "mimeType": "text/csv", "buffer": CSV}
    )
    upload.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("heading", name="Handbook", level=1)).to_be_visible()
    expect(page.locator(".set-questions li")).to_have_count(3)
    set_url = page.url

    page.locator("[data-run-form]").get_by_role("button", name="Ask").click()
    expect(page.locator(".messages")).to_contain_text("The questions are being asked")
    # No script on this page: it is reloaded until the run is done.
    done = page.locator('[data-report][data-run-status="done"]')
    deadline = time.monotonic() + RUN_GUARD_S
    while not done.count():
        assert time.monotonic() < deadline, "the run did not finish"
        page.wait_for_timeout(1000)
        page.reload()
    expect(done).to_be_visible()
    counts = [
        int(page.locator(f'[data-figure="{outcome}"] td').first.inner_text())
        for outcome in ("supported", "wrong", "abstained")
    ]
    assert sum(counts) == 3, counts
    expect(page.locator("svg.curve polyline")).to_have_count(2)
    assert page.locator("[data-curve] tbody tr").count() >= 1
    shot(page, "47-question-set-report")

    # A point below the auto policy's floor is refused, with its reason, and nothing changes.
    point_form = page.locator("[data-point-form]")
    point_form.get_by_label(re.compile(r"^Another point")).fill("0.05")
    point_form.get_by_role("button", name="Set", exact=True).click()
    expect(page.locator(".messages .error")).to_contain_text(
        re.compile(r"The auto policy never judges below 0\.\d\d; choose a point at or above it\.")
    )
    expect(page.locator("[data-space-point]")).to_have_text(
        "Answers from this space are judged at the policy’s own point."
    )
    assert page.url == set_url
    shot(page, "47-question-set-refused-point")
    assert page.console_errors == []

    # A reader of the space, not its curator: the same pages are a 404.
    reader = new_page(browser)
    sign_in(reader, live_server_url, "reader")
    assert reader.goto(url).status == 404
    assert reader.goto(set_url).status == 404
