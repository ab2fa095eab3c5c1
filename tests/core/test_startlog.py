"""Issue 51 (6): `koinon_up` shows a line per step and keeps the rest in the data
directory's log; extraction runs side by side, answers in a worker of their own. The whole
start is tested in tests/core/test_koinon_up.py (slow)."""

import io
import logging
import os

import pytest

from core import processes
from core.management.commands.koinon_up import Command as KoinonUp
from core.management.commands.koinon_up import worker_commands
from core.processes import EXTRACTION_PROCESSES_MAX, extraction_processes_default
from core.startlog import StartLog, shown_path


def test_progress_reaches_the_terminal_and_the_log_details_only_the_log(tmp_path):
    terminal = io.StringIO()
    log = StartLog(tmp_path, terminal)
    try:
        log.progress("database: PostgreSQL (embedded) started")
        log.note("celery started (pid 42)")
    finally:
        log.close()
    assert terminal.getvalue() == "database: PostgreSQL (embedded) started\n"
    kept = (tmp_path / "log" / "koinon.log").read_text()
    assert "database: PostgreSQL (embedded) started" in kept and "celery started" in kept


def test_this_process_logs_to_the_file_while_starting_and_to_its_handlers_after(tmp_path):
    logger = logging.getLogger("core.embedded")
    before = logging.getLogger().handlers[:]
    log = StartLog(tmp_path, io.StringIO())
    try:
        with log.logging_to_file():
            logger.warning("initialising embedded PostgreSQL data directory")
    finally:
        log.close()
    assert logging.getLogger().handlers == before
    assert "WARNING core.embedded initialising" in (tmp_path / "log" / "koinon.log").read_text()


def test_a_start_appends_to_the_log_of_earlier_starts(tmp_path):
    for message in ("first start", "second start"):
        log = StartLog(tmp_path, io.StringIO())
        log.progress(message)
        log.close()
    kept = (tmp_path / "log" / "koinon.log").read_text()
    assert kept.count("===== koinon_up started") == 2 and kept.index("first") < kept.index("second")


def test_the_log_path_is_shown_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "var" / "log" / "koinon.log") == "var/log/koinon.log"
    assert shown_path(tmp_path.parent / "elsewhere.log") == str(tmp_path.parent / "elsewhere.log")


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 2), (4, 4), (64, 8)])
def test_extraction_processes_follow_the_cores_up_to_a_bound(monkeypatch, cores, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert processes.extraction_processes_default() == expected
    assert expected <= EXTRACTION_PROCESSES_MAX


def test_koinon_up_extracts_side_by_side_by_default_when_cores_allow():
    options = KoinonUp().create_parser("manage.py", "koinon_up").parse_args([])
    assert options.concurrency == extraction_processes_default()
    if len(os.sched_getaffinity(0)) >= 2:
        assert options.concurrency >= 2


def test_answers_have_a_worker_of_their_own_beside_extraction():
    commands = worker_commands(concurrency=2, answer_concurrency=2)
    assert [a for a in commands["celery"] if a.startswith("--")] == [
        "--quiet",
        "--loglevel=INFO",
        "--concurrency=2",
        "--hostname=koinon@%h",
        "--queues=celery",
    ]
    assert "--queues=answers" in commands["celery-answers"]
    assert not any(a.startswith("--queues") and "answers" in a for a in commands["celery"])
