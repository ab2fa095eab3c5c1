"""Accessibility of the chat in a real browser: axe-core (vendored under tests/vendor/axe-core,
test-only) checks the login, home, conversation, receipt and source pages for serious and
critical violations, and a reader signs in, asks, opens the source and then the receipt
with the keyboard alone. Screenshots go next to test_browser.py's (a11y-*.png)."""

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.chat.helpers import PASSWORD
from tests.chat.test_browser import QUESTION, QUOTE, new_page, shot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

AXE_JS = Path(__file__).resolve().parent.parent / "vendor" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")
# Every rule axe runs by default (WCAG 2.0-2.2 A/AA and best practices); only the page's
# violations come back, each with its nodes' selectors and axe's summary of the failure.
AXE_RUN = """async () => {
  const results = await axe.run(document, {resultTypes: ["violations"]});
  return results.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.map(String), summary: n.failureSummary})),
  }));
}"""
# What the focused element is, for a keyboard test's failure message.
FOCUSED = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return "<body>";
  const text = (e.innerText || e.value || e.getAttribute("aria-label") || "").trim();
  return "<" + e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + "> " + text.slice(0, 40);
}"""


def axe_violations(page: Page) -> list[dict]:
    """axe-core's violations on the page as it is now.

    The pages' CSP (script-src 'self', no inline script) blocks page.add_script_tag(path=):
    Playwright inserts the file's text as an inline <script>, which Chromium refuses
    ("Executing inline script violates ... script-src 'self'") and add_script_tag raises.
    page.evaluate goes through the DevTools protocol, which the page's CSP does not govern,
    so axe runs on the page exactly as served, its CSP still enforced. A context with
    bypass_csp=True would also work, but it would check a page no reader ever gets.
    """
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_JS.read_text())
    return page.evaluate(AXE_RUN)


def describe(page_name: str, violation: dict) -> str:
    nodes = violation["nodes"]
    targets = ", ".join(" ".join(node["target"]) for node in nodes[:3])
    more = f" and {len(nodes) - 3} more" if len(nodes) > 3 else ""
    summary = " ".join((nodes[0]["summary"] or "").split()) if nodes else ""
    return (
        f"{page_name}: {violation['id']} ({violation['impact']}): {violation['help']}\n"
        f"    nodes: {targets}{more}\n    first: {summary}"
    )


def test_axe_finds_no_serious_or_critical_violation_on_the_chat_pages(
    browser, live_server_url, demo
):
    page = new_page(browser)
    report: list[str] = []

    def check(name: str) -> None:
        shot(page, f"a11y-{name}")
        violations = axe_violations(page)
        for violation in violations:
            print(describe(name, violation))  # every impact, shown with -s or on failure
        report.extend(describe(name, v) for v in violations if v["impact"] in BLOCKING)

    page.goto(f"{live_server_url}/login/")
    check("login")
    sign_in(page, live_server_url, "reader")
    check("home")

    # A conversation with a sealed answer, as the live activity leaves it.
    page.get_by_label("Demo").check()
    page.get_by_label("Your question").fill(QUESTION)
    page.get_by_role("button", name="Ask", exact=True).click()
    answer = page.locator("[data-answer]").first
    expect(answer.locator("blockquote").first).to_contain_text(QUOTE)
    expect(page.locator("[data-activity-log]")).to_be_attached()
    check("conversation")

    page.get_by_role("link", name="Receipt").first.click()
    expect(page.get_by_role("heading", name="Receipt")).to_be_visible()
    check("receipt")

    page.get_by_role("link", name="Back to the conversation").click()
    answer = page.locator("[data-answer]").first
    title = answer.locator("figcaption cite").first.inner_text()
    answer.locator("figcaption [data-open-source]").first.click()
    expect(page.get_by_role("heading", level=1, name=title)).to_be_visible()
    expect(page.locator("mark[data-quote]")).to_contain_text(QUOTE)
    check("source")

    assert report == [], "serious or critical axe violations:\n" + "\n".join(report)


def focused(page: Page) -> str:
    return page.evaluate(FOCUSED)


def tab_to(page: Page, selector: str, limit: int = 60) -> None:
    """Press Tab until the focused element matches `selector` (no-op if it already does);
    fails with every element focus passed through on the way."""
    matches = "s => !!document.activeElement && document.activeElement.matches(s)"
    trail: list[str] = []
    for _ in range(limit):
        if page.evaluate(matches, selector):
            outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
            assert outline != "none", f"{selector} has no visible focus indicator"
            return
        page.keyboard.press("Tab")
        trail.append(focused(page))
    pytest.fail(f"Tab never reached {selector}; focus went through:\n  " + "\n  ".join(trail))


def test_a_reader_asks_and_opens_the_source_and_the_receipt_with_the_keyboard_alone(
    browser, live_server_url, demo
):
    """Only page.keyboard after the first page load: Tab, Space, typing and Enter."""
    page = new_page(browser)
    page.goto(f"{live_server_url}/login/")
    tab_to(page, "#id_username")  # autofocused
    page.keyboard.type("reader")
    tab_to(page, "#id_password")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Ask your library")).to_be_visible()

    tab_to(page, "input[data-space='Demo']")
    page.keyboard.press("Space")
    expect(page.get_by_label("Demo")).to_be_checked()
    tab_to(page, "#id_query")
    page.keyboard.type(QUESTION)
    tab_to(page, "[data-ask-button]")
    page.keyboard.press("Enter")
    answer = page.locator("[data-answer]").first
    expect(answer.locator("blockquote").first).to_contain_text(QUOTE)
    title = answer.locator("figcaption cite").first.inner_text()
    shot(page, "a11y-keyboard-answer")

    tab_to(page, "[data-answer] figcaption a[data-open-source]")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1, name=title)).to_be_visible()
    expect(page.locator("mark[data-quote]")).to_contain_text(QUOTE)
    shot(page, "a11y-keyboard-source")

    # Back by the page's own link (Alt+Left is the browser's, not the page's, shortcut).
    tab_to(page, "main a[href*='#run-']")
    page.keyboard.press("Enter")
    expect(page.locator("[data-answer] blockquote").first).to_contain_text(QUOTE)
    tab_to(page, ".actions a[href*='/receipt/']")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Receipt")).to_be_visible()
    shot(page, "a11y-keyboard-receipt")
    assert page.console_errors == []
