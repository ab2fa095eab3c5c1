"""A fork server: one helper process per worker process that forks a parsing child per file.

Starting an interpreter and importing the parsers costs ~80 ms, more than reading most
documents. The fork server pays that once: it imports every extractor library up front
and then, for each role of each request, forks a child that sets its own address-space
limit, parses, writes one JSON answer and exits. Each file is still read in a fresh,
limited process that can be killed without harming the worker or the server.

Protocol over the server's stdin/stdout, frames of an 8-byte big-endian length and a body:
the worker sends a JSON header (fmt, roles, limits, memory_bytes, timeout) and the file's
bytes; the server answers one JSON frame per role, in order, each with the child's `pid`.

The server enforces each role's `timeout` (SIGKILL to the child) and exits when its stdin
closes, i.e. when the worker is gone, killing a child that is still parsing. The worker
restarts a server that died and gives up on one that stops answering (`ForkServer.request`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import logging
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .base import dist_version
from .bounded import parse_bounded

logger = logging.getLogger(__name__)

# The directory that holds the `knowledge` package: the server imports it from there.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]
_LENGTH = struct.Struct(">Q")
_STDERR_TAIL = 4096
# What the extractors import (billiard.exceptions alone was 5 ms of each child; the package
# imports an extractor module on its first use), and the distributions whose versions they record.
_PRELOAD_MODULES = (
    "billiard.exceptions",
    "bs4",
    "bs4.element",
    "charset_normalizer",
    "docx",
    "docx.oxml.ns",
    "docx.text.paragraph",
    "docx2txt.docx2txt",
    "encodings.ascii",
    "knowledge.extraction.docx",
    "knowledge.extraction.html",
    "knowledge.extraction.markdown",
    "knowledge.extraction.pdf",
    "knowledge.extraction.transcripts",
    "lxml.etree",
    "lxml.html",
    "markdown_it",
    "mistune",
    "pdfminer.pdfdocument",
    "pdfplumber",
    "pypdf",
    "pypdf._codecs._codecs",
    "pypdf.errors",
    "pypdf.filters",
    "webvtt",
)
_PRELOAD_DISTRIBUTIONS = (
    "beautifulsoup4",
    "charset-normalizer",
    "docx2txt",
    "lxml",
    "markdown-it-py",
    "mistune",
    "pdfplumber",
    "pypdf",
    "python-docx",
    "webvtt-py",
)


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


class ForkServerGone(Exception):
    """The fork server exited or broke the protocol before answering every role."""


# --- worker side ---------------------------------------------------------------------


class ForkServer:
    """The worker process's handle on its fork server, started on first use.

    One request at a time (a lock): a worker process extracts one revision at a time.
    After a fork the child process forgets the handle and starts its own server, so the
    children of a Celery prefork pool never share one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self._buffer = bytearray()

    @property
    def pid(self) -> int | None:
        """The running server's pid (None before the first request)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def request(
        self,
        header: dict,
        data: bytes,
        *,
        deadline: float,
        on_wait: Callable[[], None] | None,
        wait_interval: float,
    ) -> dict[str, dict]:
        """One answer per role of `header["roles"]`, as the forked children wrote them.

        A server that is gone before the request or dies during it is restarted once for
        the roles not yet answered; raises ForkServerGone when the second one fails too.
        Past `deadline` (time.monotonic) the server is killed and the roles not yet
        answered come back as `timeout`. Calls `on_wait` every `wait_interval` seconds.
        """
        answers: dict[str, dict] = {}
        with self._lock:
            for attempt in range(2):
                pending = [role for role in header["roles"] if role not in answers]
                try:
                    self._ensure_running()
                    self._send({**header, "roles": pending}, data, deadline)
                    for role in pending:
                        answers[role] = self._receive(deadline, on_wait, wait_interval)
                    return answers
                except TimeoutError:
                    logger.error("fork server %s stopped answering; killed", self.pid)
                    self._discard()
                    return answers | {role: {"ok": False, "code": "timeout"} for role in pending}
                except ForkServerGone:
                    logger.warning("fork server exited mid-request (attempt %d)", attempt + 1)
                    self._discard()
                except BaseException:
                    # A task time limit or an interrupt mid-request: the server's state
                    # is unknown, so it goes; the next request starts a fresh one.
                    self._discard()
                    raise
        raise ForkServerGone()

    def close(self) -> None:
        """Stop the server: it exits when its stdin closes; SIGKILL if it does not."""
        with self._lock:
            self._discard(grace=1.0)

    def _ensure_running(self) -> None:
        if self._process is not None and self._owner == os.getpid():
            if self._process.poll() is None:
                return
            self._discard()
        self._process = subprocess.Popen(  # our own interpreter and module
            [sys.executable, "-m", "knowledge.extraction.forkserver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=_IMPORT_ROOT,
        )
        self._owner = os.getpid()
        self._buffer.clear()

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        """The running server's stdin and stdout (it is started with both piped)."""
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise ForkServerGone()
        return process.stdin, process.stdout

    def _discard(self, grace: float = 0.0) -> None:
        process, self._process = self._process, None
        self._buffer.clear()
        if process is None:
            return
        _close_pipes(process)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _forget_after_fork(self) -> None:
        """In a forked child: the server belongs to the parent; close our copies only."""
        self._lock = threading.Lock()
        process, self._process = self._process, None
        self._buffer.clear()
        if process is not None:
            _close_pipes(process)
            process.returncode = 0  # not ours to wait for

    def _send(self, header: dict, data: bytes, deadline: float) -> None:
        message = _frame(json.dumps(header).encode()) + _frame(data)
        fd = self._pipes()[0].fileno()
        os.set_blocking(fd, False)
        view = memoryview(message)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError()
            _, writable, _ = select.select([], [fd], [], remaining)
            if writable:
                try:
                    view = view[os.write(fd, view) :]
                except BrokenPipeError:
                    raise ForkServerGone() from None

    def _receive(
        self, deadline: float, on_wait: Callable[[], None] | None, wait_interval: float
    ) -> dict:
        fd = self._pipes()[1].fileno()
        while True:
            body = _unframe(self._buffer)
            if body is not None:
                return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError()
            readable, _, _ = select.select([fd], [], [], min(wait_interval, remaining))
            if not readable:
                if on_wait is not None:
                    on_wait()
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise ForkServerGone()
            self._buffer += chunk


def _frame(body: bytes) -> bytes:
    return _LENGTH.pack(len(body)) + body


def _unframe(buffer: bytearray) -> bytes | None:
    """The first complete frame's body, removed from `buffer`; None if it is incomplete."""
    if len(buffer) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack_from(buffer)
    end = _LENGTH.size + length
    if len(buffer) < end:
        return None
    body = bytes(buffer[_LENGTH.size : end])
    del buffer[:end]
    return body


server = ForkServer()
os.register_at_fork(after_in_child=server._forget_after_fork)
atexit.register(server.close)


# --- server side ---------------------------------------------------------------------


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts, missing = [], size
    while missing:
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        missing -= len(chunk)
    return b"".join(parts)


def _read_frame(fd: int) -> bytes | None:
    """A frame's body from `fd`; None at end of file (the worker is gone)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(head)[0])


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _preload() -> None:
    """Import what the children would import and cache the versions they record."""
    for name in _PRELOAD_MODULES:
        # A library that fails to import fails again in the child, which reports it.
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    for distribution in _PRELOAD_DISTRIBUTIONS:
        dist_version(distribution)


def _die_with_parent(parent: int) -> None:
    """SIGKILL this child when the server dies (Linux), so no parse outlives it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the server died before prctl took effect
        os._exit(1)


def _child(header: dict, role: str, data: bytes, result_fd: int, stderr_fd: int) -> None:
    """In the forked child: never returns."""
    status = 0
    try:
        _die_with_parent(int(header["server_pid"]))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the worker's pipes are the server's, not ours
        os.dup2(stderr_fd, 1)
        os.dup2(stderr_fd, 2)
        answer = parse_bounded(header, role, data)
        _write_all(result_fd, json.dumps(answer).encode())
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)


def _run_child(header: dict, role: str, data: bytes) -> dict:
    """Fork a child for one role, wait for its answer or its timeout, reap it."""
    result_r, result_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        os.close(stderr_r)
        _child(header, role, data, result_w, stderr_w)
    os.close(result_w)
    os.close(stderr_w)
    chunks: dict[int, bytearray] = {result_r: bytearray(), stderr_r: bytearray()}
    open_fds = {result_r, stderr_r}
    deadline = time.monotonic() + header["timeout"]
    timed_out = False
    try:
        while open_fds:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            readable, _, _ = select.select([*open_fds, 0], [], [], remaining)
            if 0 in readable:  # the worker never writes mid-request: it is gone
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os._exit(0)
            for fd in readable:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    open_fds.discard(fd)
                    continue
                chunks[fd] += chunk
                if fd == stderr_r and len(chunks[fd]) > 2 * _STDERR_TAIL:
                    del chunks[fd][:-_STDERR_TAIL]
    finally:
        os.close(result_r)
        os.close(stderr_r)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"ok": False, "code": "timeout", "pid": pid}
    try:
        return json.loads(chunks[result_r]) | {"pid": pid}
    except ValueError:
        return {
            "ok": False,
            "code": "corrupt",
            "pid": pid,
            "exit_status": status,
            "stderr": chunks[stderr_r][-_STDERR_TAIL:].decode(errors="replace"),
        }


def serve() -> None:
    """The server's main loop: a request, one forked child per role, until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the worker; EOF ends us
    _preload()
    # Out of the collector's sight: its passes would otherwise touch (and so copy) every
    # preloaded object's page in each child, a third of a child's cost.
    gc.freeze()
    while True:
        header = _read_frame(0)
        data = _read_frame(0) if header is not None else None
        if header is None or data is None:
            return
        request = json.loads(header) | {"server_pid": os.getpid()}
        for role in request["roles"]:
            try:
                _write_all(1, _frame(json.dumps(_run_child(request, role, data)).encode()))
            except BrokenPipeError:
                return  # the worker is gone


if __name__ == "__main__":
    serve()
