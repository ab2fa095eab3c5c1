"""The fork server: one long-lived helper per worker process, a fresh child per role.

Most talk to knowledge.extraction.forkserver and isolated directly, without the database.
"""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest

from knowledge.extraction import ExtractionError, Limits
from knowledge.extraction import forkserver as forkserver_module
from knowledge.extraction.isolated import extract_isolated
from tests.knowledge.test_documents import pdf_bytes
from tests.knowledge.test_extraction_limits import docx_with_empty_paragraphs

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(max_chars=5_000_000, max_pages=2000)
MEMORY = 1536 * 1024 * 1024
server = forkserver_module.server


def ask(data: bytes, *, roles=("primary", "secondary"), fmt="text", timeout=30.0, on_wait=None):
    """The fork server's raw answers (with each child's pid)."""
    header = {
        "fmt": fmt,
        "roles": list(roles),
        "limits": asdict(LIMITS),
        "memory_bytes": MEMORY,
        "timeout": timeout,
    }
    return server.request(
        header,
        data,
        deadline=time.monotonic() + 60,
        on_wait=on_wait,
        wait_interval=0.02,
    )


def slow_pdf() -> bytes:
    return pdf_bytes([f"Page {n} of a long report about nothing much." for n in range(400)])


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pid: int) -> None:
    for _ in range(200):
        if gone(pid):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} is still alive")


def test_extractions_reuse_one_fork_server_and_a_fresh_child_for_every_role():
    first = ask(b"First document.")
    server_pid = server.pid
    second = ask(b"Second document.")
    assert server.pid == server_pid
    assert first["primary"]["text"] == "First document."
    assert second["secondary"]["text"] == "Second document."
    children = [answer["pid"] for answer in (*first.values(), *second.values())]
    assert len(set(children)) == 4
    assert not {server_pid, os.getpid()} & set(children)
    assert all(gone(pid) for pid in children)  # reaped by the server: no zombies


def test_the_fork_server_is_started_once_per_process_not_per_extraction():
    ask(b"Warm up.")
    server_pid = server.pid
    children = {p.pid for p in psutil.Process().children()}  # the suite's services too
    assert server_pid in children
    for n in range(5):
        extract_isolated(
            "text",
            f"Document {n}.".encode(),
            roles=["primary", "secondary"],
            limits=LIMITS,
            timeout=30,
            memory_bytes=MEMORY,
        )
    assert server.pid == server_pid
    assert {p.pid for p in psutil.Process().children()} == children


def test_a_timeout_kills_only_the_child_and_the_next_extraction_works():
    ask(b"Warm up.")
    server_pid = server.pid
    answers = ask(slow_pdf(), fmt="pdf", roles=["primary"], timeout=0.001)
    assert answers["primary"]["code"] == "timeout"
    wait_until_gone(answers["primary"]["pid"])
    assert server.pid == server_pid
    assert ask(b"Still reading.")["primary"]["text"] == "Still reading."


def test_a_fork_server_killed_between_extractions_is_restarted():
    ask(b"Warm up.")
    killed = server.pid
    os.kill(killed, signal.SIGKILL)
    wait_until_gone(killed)
    result = extract_isolated(
        "text",
        b"After the kill.",
        roles=["primary", "secondary"],
        limits=LIMITS,
        timeout=30,
        memory_bytes=MEMORY,
    )
    assert result["primary"].text == result["secondary"].text == "After the kill."
    assert server.pid not in (None, killed)


def test_a_fork_server_killed_mid_parse_takes_its_child_along_and_the_work_is_redone():
    ask(b"Warm up.")
    killed = server.pid
    victims = []

    def kill_the_server() -> None:
        if not victims:
            victims.extend(child.pid for child in psutil.Process(killed).children())
            os.kill(killed, signal.SIGKILL)

    answers = ask(slow_pdf(), fmt="pdf", roles=["primary"], on_wait=kill_the_server)
    assert victims, "the parse ended before the server could be killed"
    assert answers["primary"]["ok"]
    assert "Page 399" in answers["primary"]["text"]
    assert server.pid != killed
    for pid in victims:
        wait_until_gone(pid)  # PR_SET_PDEATHSIG: no parse outlives its server


def test_an_interrupt_mid_extraction_discards_the_server_and_its_child():
    """A task's soft time limit arrives as an exception in the worker, often mid-wait."""
    from celery.exceptions import SoftTimeLimitExceeded

    ask(b"Warm up.")
    interrupted = server.pid
    children = []

    def time_limit() -> None:
        children.extend(child.pid for child in psutil.Process(interrupted).children())
        raise SoftTimeLimitExceeded()

    with pytest.raises(SoftTimeLimitExceeded):
        ask(slow_pdf(), fmt="pdf", roles=["primary"], on_wait=time_limit)
    assert children, "the parse ended before the time limit came"
    wait_until_gone(interrupted)
    for pid in children:
        wait_until_gone(pid)
    assert ask(b"Next revision.")["primary"]["text"] == "Next revision."
    assert server.pid != interrupted


def test_a_fork_server_that_keeps_dying_falls_back_to_spawned_children(monkeypatch):
    def always_gone(*args, **kwargs):
        raise forkserver_module.ForkServerGone()

    monkeypatch.setattr(server, "request", always_gone)
    result = extract_isolated(
        "text",
        b"Read anyway.",
        roles=["primary", "secondary"],
        limits=LIMITS,
        timeout=30,
        memory_bytes=MEMORY,
    )
    assert result["primary"].text == result["secondary"].text == "Read anyway."


def test_the_heartbeat_is_called_while_a_child_parses():
    beats = []
    answers = ask(slow_pdf(), fmt="pdf", roles=["primary"], on_wait=lambda: beats.append(1))
    assert answers["primary"]["ok"]
    assert beats


def test_a_memory_limit_in_the_forked_child_gives_too_large_and_spares_the_server():
    ask(b"Warm up.")
    server_pid = server.pid
    # With the element count check lifted, only the child's address-space limit stops it.
    result = extract_isolated(
        "docx",
        docx_with_empty_paragraphs(3_000_000),
        roles=["primary", "secondary"],
        limits=Limits(max_chars=5_000_000, max_pages=2000, max_elements=10**9),
        timeout=60,
        memory_bytes=256 * 1024 * 1024,
    )
    assert {role: (type(r), r.code) for role, r in result.items()} == {
        "primary": (ExtractionError, "too_large"),
        "secondary": (ExtractionError, "too_large"),
    }
    assert server.pid == server_pid
    assert ask(b"Still reading.")["primary"]["text"] == "Still reading."


# A single-threaded process that forks as a Celery prefork pool does: the test process
# has threads, and fork() there may deadlock the child.
FORKING_WORKER = """
import json, os
from knowledge.extraction import Limits
from knowledge.extraction.forkserver import server
from knowledge.extraction.isolated import extract_isolated

def read(data):
    result = extract_isolated("text", data, roles=["primary"], timeout=30,
                              limits=Limits(max_chars=10**6, max_pages=10), memory_bytes=2**31)
    return result["primary"].text

read(b"Warm up.")
parent_server = server.pid
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    text = read(b"In the forked worker.")
    os.write(write_end, json.dumps([server.pid, text]).encode())
    server.close()
    os._exit(0)
os.close(write_end)
child_server, text = json.loads(os.read(read_end, 1000))
_, status = os.waitpid(pid, 0)
after = read(b"Parent again.")
print(json.dumps({"parent": parent_server, "parent_after": server.pid, "child": child_server,
                  "text": text, "status": status, "after": after}))
"""


def test_a_forked_worker_process_starts_its_own_fork_server():
    """What a Celery prefork child does: it must never share its parent's server."""
    done = subprocess.run(
        [sys.executable, "-c", FORKING_WORKER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["status"] == 0
    assert report["text"] == "In the forked worker."
    assert report["child"] not in (None, report["parent"])
    assert report["parent_after"] == report["parent"]
    assert report["after"] == "Parent again."


def test_extractions_leak_no_file_descriptors():
    ask(b"Warm up.")
    before = len(os.listdir("/proc/self/fd"))
    for n in range(10):
        ask(f"Document {n}.".encode())
    ask(slow_pdf(), fmt="pdf", roles=["primary"], timeout=0.001)
    assert len(os.listdir("/proc/self/fd")) <= before  # a leak adds; a closed idle socket may go


@pytest.mark.parametrize("isolation", ["forkserver", "spawn"])
def test_both_isolation_modes_read_every_role(isolation):
    result = extract_isolated(
        "markdown",
        b"# Title\n\nSome *text*.",
        roles=["primary", "secondary"],
        limits=LIMITS,
        timeout=30,
        memory_bytes=MEMORY,
        isolation=isolation,
    )
    assert result["primary"].text == result["secondary"].text == "Title\n\nSome text."
    assert result["primary"].extractor != result["secondary"].extractor


@pytest.mark.django_db
def test_revision_extract_reads_through_the_fork_server_not_new_interpreters(
    space, owner, monkeypatch
):
    from knowledge.documents.extraction import revision_extract
    from knowledge.documents.upload import document_upload
    from knowledge.models import Extraction

    ask(b"Warm up.")
    server_pid = server.pid

    def no_new_interpreter(*args, **kwargs):
        raise AssertionError("an extraction started an interpreter")

    monkeypatch.setattr(subprocess, "Popen", no_new_interpreter)
    result = document_upload(
        user=owner, filename="notes.txt", data=b"Read by forked children.", space=space
    )
    revision_extract(revision_id=result.revision.pk)
    extractions = Extraction.objects.filter(revision=result.revision)
    assert {(e.role, e.status, e.progress) for e in extractions} == {
        ("primary", "admitted", 100),
        ("secondary", "admitted", 100),
    }
    assert server.pid == server_pid
