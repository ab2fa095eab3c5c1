"""Test settings: the suite runs its own embedded services under var/test."""

import os
from pathlib import Path

os.environ.setdefault(
    "KOINON_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test")
)

from koinon.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
KOINON_HEALTH_TIMEOUT = 1.0
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405 - whitenoise warns when missing
LOG_DIR = DATA_DIR / "traces"  # noqa: F405 - run traces of the suite stay out of logs/

if os.environ.get("KOINON_DATABASE_NAME"):  # a child process (Daphne) of the suite
    MIDDLEWARE = ["tests.middleware.fresh_content_types", *MIDDLEWARE]  # noqa: F405
    # MCP tool calls do not pass Django's middleware; the same hook wraps each of them. A
    # test hook only: koinon/settings.py does not declare it (mcp_server.services._hooks).
    KOINON_MCP_CALL_HOOKS = ["tests.middleware.fresh_content_types"]

# Workers announce themselves quickly, so the suite need not wait for a heartbeat.
KOINON_WORKER_HEARTBEAT_INTERVAL = 0.5
# Tests call the sweeper themselves; the suite's worker must not race them to it.
KOINON_SWEEP_INTERVAL = 3600.0
# Nor sweep as it starts: a sweep's row locks racing a test's flush (TRUNCATE) deadlock.
KOINON_SWEEP_AT_START = False
# A stream whose run never executes (no worker in that test) ends within the test's patience.
KOINON_STREAM_TIMEOUT = 20.0
# The suite's worker forgets cached content types before each task (tests/celery_hooks.py).
CELERY_IMPORTS = ["tests.celery_hooks"]
# The answer log's tests integrate themselves (tests/audit/test_log.py); the suite's worker
# must not integrate entries while a transactional test's teardown truncates the tables.
KOINON_LOG_INTEGRATE_AFTER_COMMIT = False
# Only a key a test configures: never one a koinon_up test left in the suite's data directory.
KOINON_LOG_KEY_FILE = os.environ.get("KOINON_LOG_KEY_FILE", "")
# A checkpoint per integration: the log's tests count them (the interval has its own tests).
KOINON_LOG_CHECKPOINT_SECONDS = 0
# Outside channels' credentials: one fixed key for the suite's every process (a test key, not
# a secret), unless the environment sets one.
KOINON_CREDENTIALS_KEY = (
    os.environ.get("KOINON_CREDENTIALS_KEY") or "a29pbm9uLXRlc3QtY3JlZGVudGlhbHMta2V5LTMyYiE="
)
