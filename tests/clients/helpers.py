"""What the client test drivers share: the live corpus, keys for the other languages'
suites, and running such a suite as a child process against the suite's live server."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core.services import api_key_create
from knowledge.models import DocumentRevision
from tests.knowledge.test_documents import wait_for_extraction

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"
# A README's runnable example: the fenced block right after a `<!-- quickstart: … -->` line.
QUICKSTART = re.compile(r"^<!-- quickstart: [^\n]*-->\n```(\w+)\n(.*?)^```$", re.M | re.S)


def toolchain(name: str, install: str) -> str:
    """The path of a toolchain's command; the test fails (never skips) without it."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not installed: `{install}` installs it")
    return path


def suite_environment(*, live_server_url: str, reader, outsider) -> dict[str, str]:
    """The environment of another language's client suite: the server, a reader's key
    (the library's member) and an outsider's key, as koinon's own variables."""
    return {
        **os.environ,
        "KOINON_URL": live_server_url,
        "KOINON_KEY": api_key_create(user=reader).secret,
        "KOINON_OUTSIDER_KEY": api_key_create(user=outsider).secret,
    }


def suite_run(command: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    """Run a client suite to its end; its output, or a failure that shows it. Uploads it
    made are extracted by the worker meanwhile: wait for them, or the teardown's TRUNCATE
    deadlocks with the worker writing passages."""
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    for revision in DocumentRevision.objects.values_list("pk", flat=True):
        wait_for_extraction(revision)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def readme_quickstart(readme: Path, language: str) -> str:
    """The one quickstart block of `language` in a README: the tests run what the docs
    show, so the docs cannot drift from a working program."""
    blocks = [code for info, code in QUICKSTART.findall(readme.read_text()) if info == language]
    assert len(blocks) == 1, f"{readme}: {len(blocks)} quickstart blocks of {language}"
    return blocks[0]
