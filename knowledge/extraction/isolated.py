"""Extraction in a fresh child process with an address-space limit and a wall-clock timeout.

Every role of every file is parsed in a process of its own that has set RLIMIT_AS on
itself (knowledge.extraction.bounded): an allocation past the limit fails there
(`too_large`), a child that overruns `timeout` is killed (`timeout`), and the worker
stays intact either way. Two ways to get that process (KOINON_EXTRACT_ISOLATION):

- "forkserver" (the default): the worker's fork server, which has imported the
  extractors once, forks one child per role (knowledge.extraction.forkserver);
- "spawn": a new interpreter per role, `python -m knowledge.extraction.bounded`, which
  pays ~80 ms of start-up and imports before reading a byte. Needs no helper process.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from . import forkserver
from .base import ExtractionError, ExtractionResult, Limits, Segment

logger = logging.getLogger(__name__)

ISOLATION_MODES = ("forkserver", "spawn")
# Beyond the roles' own timeouts, what a healthy fork server may take to fork and reap.
_SERVER_GRACE = 10.0
# The directory that holds the `knowledge` package: the spawned child imports it from there.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]


def extract_isolated(
    fmt: str,
    data: bytes,
    *,
    roles: Sequence[str],
    limits: Limits,
    timeout: float,
    memory_bytes: int,
    isolation: str = "forkserver",
    on_wait: Callable[[], None] | None = None,
    wait_interval: float = 5.0,
) -> dict[str, ExtractionResult | ExtractionError]:
    """`knowledge.extraction.extract` for each of `roles`, each in a bounded child process.

    Returns each role's result or its ExtractionError (the codes of `extract`, plus
    `timeout` when the role's child runs longer than `timeout` seconds; a child that
    dies without an answer is `corrupt`): one role's failure does not touch the other.
    Calls `on_wait` every `wait_interval` seconds while children run (the caller's
    heartbeat). Every child is gone when this returns or raises.
    """
    if isolation not in ISOLATION_MODES:
        raise ValueError(f"isolation must be one of {ISOLATION_MODES}, not {isolation!r}")
    header = {
        "fmt": fmt,
        "roles": list(roles),
        "limits": asdict(limits),
        "memory_bytes": memory_bytes,
        "timeout": timeout,
    }
    if isolation == "spawn":
        answers = {
            role: _answer_spawned(header, role, data, on_wait, wait_interval) for role in roles
        }
    else:
        answers = _answer_forked(header, data, on_wait, wait_interval)
    return {role: _outcome(answers[role]) for role in roles}


def _answer_forked(
    header: dict, data: bytes, on_wait: Callable[[], None] | None, wait_interval: float
) -> dict[str, dict]:
    deadline = time.monotonic() + header["timeout"] * len(header["roles"]) + _SERVER_GRACE
    try:
        answers = forkserver.server.request(
            header, data, deadline=deadline, on_wait=on_wait, wait_interval=wait_interval
        )
    except forkserver.ForkServerGone:
        # Not the file's fault (the server dies without a parse in it): still bounded,
        # by the slower way, rather than failing the document.
        logger.error("the fork server keeps dying; extracting in spawned children")
        return {
            role: _answer_spawned(header, role, data, on_wait, wait_interval)
            for role in header["roles"]
        }
    for answer in answers.values():
        if "stderr" in answer:
            logger.warning(
                "extraction child %s ended with status %s without an answer: %s",
                answer["pid"],
                answer["exit_status"],
                answer["stderr"][-500:],
            )
    return answers


def _answer_spawned(
    header: dict,
    role: str,
    data: bytes,
    on_wait: Callable[[], None] | None,
    wait_interval: float,
) -> dict:
    """One role in a new interpreter: the header line and the bytes in, the answer out."""
    process = subprocess.Popen(  # our own interpreter and module
        [sys.executable, "-m", "knowledge.extraction.bounded"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=_IMPORT_ROOT,
    )
    payload: bytes | None = json.dumps(header | {"role": role}).encode() + b"\n" + data
    deadline = time.monotonic() + header["timeout"]
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {"ok": False, "code": "timeout"}
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
        return json.loads(output)
    except ValueError:
        logger.warning(
            "extraction child exited with %s without an answer: %s",
            process.returncode,
            errors.decode(errors="replace")[-500:],
        )
        return {"ok": False, "code": "corrupt"}


def _outcome(answer: dict) -> ExtractionResult | ExtractionError:
    if not answer.get("ok"):
        return ExtractionError(answer.get("code", "corrupt"))
    return ExtractionResult(
        text=answer["text"],
        segments=[Segment(start, end, locator) for start, end, locator in answer["segments"]],
        extractor=answer["extractor"],
        extractor_version=answer["extractor_version"],
    )
