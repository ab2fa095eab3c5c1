"""From nothing to a first answer with only a browser (issue 51, item 1): Playwright drives
Debian's Chromium against the suite's live Daphne and Celery worker, with the demo data (its
superuser `admin`, the reader `reader` and `outsider`). Screenshots go to
var/test/screenshots/ (51-*.png)."""

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.chat.test_accessibility import BLOCKING, axe_violations, describe
from tests.chat.test_browser import new_page, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

CRANE = "The harbour crane is inspected every Tuesday by the dock master."


def sign_in_with(page: Page, url: str, username: str, password: str) -> None:
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Ask your library")).to_be_visible()


def assert_accessible(page: Page, name: str) -> None:
    """No serious or critical axe-core violation on the page as it is now."""
    blocking = [describe(name, v) for v in axe_violations(page) if v["impact"] in BLOCKING]
    assert blocking == [], "\n".join(blocking)


def test_a_superuser_makes_a_curator_who_builds_a_space_with_members_a_key_and_an_answer(
    browser, live_server_url, tmp_path
):
    # The superuser creates a staff user; the password is shown once.
    admin = new_page(browser)
    sign_in(admin, live_server_url, "admin")
    admin.get_by_role("link", name="Users").click()
    admin.get_by_label("Username").fill("harbour-lead")
    admin.get_by_label("Staff").check()
    admin.get_by_role("button", name="Create user").click()
    password = admin.locator("[data-secret-value]").inner_text()
    expect(admin.locator("tr[data-person='harbour-lead']")).to_contain_text("staff")
    shot(admin, "51-user-created")
    assert_accessible(admin, "users")
    admin.get_by_role("link", name="Users").click()
    expect(admin.locator("[data-secret]")).to_have_count(0)
    assert password not in admin.content()

    # The new curator signs in with it and creates a space, which they curate.
    lead = new_page(browser)
    sign_in_with(lead, live_server_url, "harbour-lead", password)
    lead.get_by_role("link", name="Library").click()
    lead.get_by_role("link", name="New space").click()
    assert_accessible(lead, "new-space")
    lead.get_by_label("Name").fill("Harbour")
    lead.get_by_label("Description (optional)").fill("Cranes, docks and the canteen.")
    lead.get_by_role("button", name="Create space").click()
    expect(lead.get_by_role("heading", name="Members of Harbour")).to_be_visible()
    expect(lead.locator("tr[data-member='harbour-lead']")).to_have_attribute("data-role", "curator")

    # Two members: a reader and a second curator.
    for username, role in [("reader", "reader"), ("outsider", "curator")]:
        lead.get_by_label("Username").fill(username)
        lead.get_by_label("Role").select_option(role)
        lead.get_by_role("button", name="Give this role").click()
        expect(lead.locator(f"tr[data-member='{username}']")).to_have_attribute("data-role", role)
    lead.get_by_label("Username").fill("nobody")
    lead.get_by_role("button", name="Give this role").click()
    expect(lead.locator(".errorlist")).to_contain_text("No active user by this name.")
    lead.console_errors.clear()  # the refused form is a 422, as it should be
    shot(lead, "51-members")
    assert_accessible(lead, "members")

    # An API key, shown once; it reads the new space over the REST API.
    lead.get_by_role("link", name="API keys").click()
    lead.get_by_label("Name").fill("laptop")
    lead.get_by_role("button", name="Create key").click()
    key = lead.locator("[data-secret-value]").inner_text()
    shot(lead, "51-api-key")
    assert_accessible(lead, "api-keys")
    lead.get_by_role("link", name="API keys").click()
    expect(lead.locator("tr[data-key]")).to_have_count(1)
    assert key not in lead.content()
    spaces = httpx.get(
        f"{live_server_url}/v1/spaces", headers={"Authorization": f"Bearer {key}"}, timeout=60
    )
    assert spaces.status_code == 200
    assert [row["name"] for row in spaces.json()["results"]] == ["Harbour"]

    # A document into the space, and an answer from it.
    (tmp_path / "harbour.md").write_text(f"# Harbour\n\n{CRANE}\n")
    lead.get_by_role("link", name="Library").click()
    lead.get_by_role("link", name="Harbour").click()
    lead.get_by_label("Add documents to this space").set_input_files(tmp_path / "harbour.md")
    lead.get_by_role("button", name="Upload", exact=True).click()
    row = lead.locator("li[data-document]", has_text="Harbour")
    expect(row).to_have_attribute("data-state", "admitted", timeout=120_000)
    lead.get_by_role("link", name="Conversations").click()
    lead.get_by_label("Harbour").check()
    lead.get_by_label("Your question").fill("Who inspects the harbour crane?")
    lead.get_by_role("button", name="Ask", exact=True).click()
    expect(lead.locator("[data-answer] blockquote").first).to_contain_text(CRANE)
    shot(lead, "51-first-answer")
    assert lead.console_errors == []
    assert admin.console_errors == []
