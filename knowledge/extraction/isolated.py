"""Extraction in a child process with an address-space limit and a wall-clock timeout.

Parsers allocate in C, far from any Python check, and one hostile file can take a
worker to gigabytes. The child sets RLIMIT_AS on itself before reading the file,
so an allocation past the limit fails there (MemoryError → `too_large`) and the
worker stays intact; a child that overruns `timeout` is killed (`timeout`).

Protocol: the parent writes one JSON header line and then the file's bytes to
the child's stdin; the child writes one JSON object to stdout.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from .base import ExtractionError, ExtractionResult, Limits, Segment

logger = logging.getLogger(__name__)

# The directory that holds the `knowledge` package: the child imports it from there.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]


def extract_isolated(
    fmt: str,
    data: bytes,
    *,
    role: str,
    limits: Limits,
    timeout: float,
    memory_bytes: int,
    on_wait: Callable[[], None] | None = None,
    wait_interval: float = 5.0,
) -> ExtractionResult:
    """`knowledge.extraction.extract` in a bounded child process.

    Calls `on_wait` every `wait_interval` seconds while the child runs (the caller's
    heartbeat). Raises ExtractionError like `extract`, plus `timeout` when the child
    runs longer than `timeout` seconds; a child that dies without an answer is
    `corrupt`. The child is always gone when this returns or raises.
    """
    header = {"fmt": fmt, "role": role, "limits": asdict(limits), "memory_bytes": memory_bytes}
    process = subprocess.Popen(  # our own interpreter and module
        [sys.executable, "-m", "knowledge.extraction.isolated"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=_IMPORT_ROOT,
    )
    payload: bytes | None = json.dumps(header).encode() + b"\n" + data
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ExtractionError("timeout")
            try:
                output, errors = process.communicate(payload, timeout=min(wait_interval, remaining))
                break
            except subprocess.TimeoutExpired:
                payload = None  # already handed over; communicate() keeps writing it
                if on_wait is not None:
                    on_wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    try:
        answer = json.loads(output)
    except ValueError:
        logger.warning(
            "extraction child exited with %s without an answer: %s",
            process.returncode,
            errors.decode(errors="replace")[-500:],
        )
        raise ExtractionError("corrupt") from None
    if not answer.get("ok"):
        raise ExtractionError(answer.get("code", "corrupt"))
    return ExtractionResult(
        text=answer["text"],
        segments=[Segment(start, end, locator) for start, end, locator in answer["segments"]],
        extractor=answer["extractor"],
        extractor_version=answer["extractor_version"],
    )


def _answer(header: dict, data: bytes) -> str:
    from knowledge.extraction import extract

    result = extract(header["fmt"], data, role=header["role"], **header["limits"])
    return json.dumps(
        {
            "ok": True,
            "text": result.text,
            "segments": [[s.char_start, s.char_end, s.locator] for s in result.segments],
            "extractor": result.extractor,
            "extractor_version": result.extractor_version,
        }
    )


def _memory_exhausted(limit: int) -> bool:
    """Whether this process's address space came within 64 MiB of its limit.

    C parsers report a failed allocation in their own words (lxml: "unknown
    error"), which `extract` records as `corrupt`; the peak size tells the truth.
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("VmPeak:"):
            return int(line.split()[1]) * 1024 > limit - 64 * 1024 * 1024
    return False


def _child() -> None:
    import resource

    header = json.loads(sys.stdin.buffer.readline())
    limit = header["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    code = None
    try:
        encoded = _answer(header, sys.stdin.buffer.read())
    except ExtractionError as error:
        code = error.code
    except MemoryError:
        code = "too_large"
    # Outside the handlers: the failed parse's frames (and memory) are released now.
    if code is not None:
        if code == "corrupt" and _memory_exhausted(limit):
            code = "too_large"
        encoded = json.dumps({"ok": False, "code": code})
    sys.stdout.write(encoded)
    sys.stdout.flush()


if __name__ == "__main__":
    _child()
