# The mixed-sources corpus of the answer tests (two documents and the invoices dataset).
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import Browser, sync_playwright

from knowledge.models import Extraction, ExtractionStatus
from tests.chat.helpers import PASSWORD, wait_for

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def demo(celery_worker) -> None:
    """loaddemo as `make run` does, its extractions done by the suite's worker."""
    call_command("loaddemo")
    get_user_model().objects.create_user("outsider", password=PASSWORD)
    wait_for(
        lambda: (
            not Extraction.objects.filter(
                status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING]
            ).exists()
        )
    )


@pytest.fixture
def browser(demo) -> Iterator[Browser]:
    """Started after the database fixtures and stopped before them: Playwright's sync API
    runs an event loop in this thread, in which the ORM (the final flush) refuses to run."""
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: apt-get install chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield browser
        browser.close()
