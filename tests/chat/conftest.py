# The mixed-sources corpus of the answer tests (two documents and the invoices dataset).
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from playwright.sync_api import Browser, sync_playwright

from knowledge.models import Extraction, ExtractionStatus
from tests.answers.conftest import library  # noqa: F401

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
PASSWORD = "koinon-demo"


@pytest.fixture
def demo(celery_worker) -> None:
    """loaddemo as `make run` does, its extractions done by the suite's worker."""
    call_command("loaddemo")
    get_user_model().objects.create_user("outsider", password=PASSWORD)
    wait_for(lambda: not Extraction.objects.filter(
        status__in=[ExtractionStatus.PENDING, ExtractionStatus.RUNNING]).exists())  # fmt: skip


def wait_for(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.25)


@pytest.fixture
def browser(demo) -> Iterator[Browser]:
    """Started after the database fixtures and stopped before them: Playwright's sync API
    runs an event loop in this thread, in which the ORM (the final flush) refuses to run."""
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: apt-get install chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield browser
        browser.close()
