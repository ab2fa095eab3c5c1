"""What runs inside the limited child: set RLIMIT_AS on itself, parse one role, answer.

Parsers allocate in C, far from any Python check, and one hostile file can take a
process to gigabytes. The child sets RLIMIT_AS on itself before parsing, so an
allocation past the limit fails there (MemoryError → `too_large`) and the worker stays
intact. The answer is a JSON-ready dict: {"ok": true, "text", "segments", "extractor",
"extractor_version"} or {"ok": false, "code"}.

Run as a module (`python -m knowledge.extraction.bounded`) it is the "spawn" child: one
JSON header line and the file's bytes on stdin, the answer on stdout.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

from . import extract
from .base import ExtractionError


def parse_bounded(header: dict, role: str, data: bytes) -> dict:
    """Parse `data` as `header["fmt"]` with `role`'s extractor under the address-space limit.

    Only for a process of its own: the limit stays set for the rest of its life.
    """
    limit = header["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    code = None
    try:
        answer = _answer(header, role, data)
    except ExtractionError as error:
        code = error.code
    except MemoryError:
        code = "too_large"
    # Outside the handlers: the failed parse's frames (and memory) are released now.
    if code is None:
        return answer
    if code == "corrupt" and _memory_exhausted(limit):
        code = "too_large"
    return {"ok": False, "code": code}


def _answer(header: dict, role: str, data: bytes) -> dict:
    result = extract(header["fmt"], data, role=role, **header["limits"])
    return {
        "ok": True,
        "text": result.text,
        "segments": [[s.char_start, s.char_end, s.locator] for s in result.segments],
        "extractor": result.extractor,
        "extractor_version": result.extractor_version,
    }


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


def _spawned_child() -> None:
    header = json.loads(sys.stdin.buffer.readline())
    answer = parse_bounded(header, header["role"], sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    _spawned_child()
