"""Guards against a hang: generous limits that fail a test that never returns, never a
measured bound on how fast something is (speed lives in bench/)."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager

HANG_GUARD_S = 120


@contextmanager
def no_hang(seconds: int = HANG_GUARD_S) -> Iterator[None]:
    """Fail the block if it is still running after `seconds` (main thread only)."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds}s: it hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
