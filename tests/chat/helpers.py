"""Helpers of the chat tests (fixtures stay in tests/chat/conftest.py)."""

import time

PASSWORD = "koinon-demo"  # the demo users' password (loaddemo)


def wait_for(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.25)
