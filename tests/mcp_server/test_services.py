"""The tool runner in-process: query counts, the audit's bounds, bugs and audit failures."""

import dataclasses

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_server import tools
from mcp_server.models import ToolCall
from mcp_server.services import arguments_for_audit, tool_call_run
from mcp_server.tools import Caller
from tests.mcp_server.helpers import ingest

pytestmark = pytest.mark.django_db


def run(user, tool: str, **arguments):
    return tool_call_run(
        caller=Caller(user=user), tool=tool, arguments=arguments, transport="stdio"
    )


def test_list_sources_reads_in_a_fixed_number_of_queries(
    space, owner, member, django_assert_num_queries
):
    ingest(owner, "one.txt", "The first document.", space=space)
    run(member, "list_sources")  # warms the content-type cache
    with CaptureQueriesContext(connection) as few:
        run(member, "list_sources")
    for number in range(5):
        ingest(owner, f"more-{number}.txt", f"Document number {number}.", space=space)
    with django_assert_num_queries(len(few.captured_queries)):
        outcome = run(member, "list_sources")
    assert len(outcome.payload["documents"]) == 6 and outcome.result_count == 7


def test_list_sources_says_which_documents_are_withdrawn(space, owner, member):
    from knowledge.lifecycle import document_withdraw

    kept = ingest(owner, "kept.txt", "The kept document.", space=space)
    gone = ingest(owner, "gone.txt", "The withdrawn document.", space=space)
    document_withdraw(user=owner, document=gone.document)
    documents = {d["id"]: d for d in run(member, "list_sources").payload["documents"]}
    assert documents[kept.document.pk]["withdrawn"] is False
    assert documents[gone.document.pk]["withdrawn"] is True


def test_the_audit_keeps_arguments_bounded_and_storable():
    stored = arguments_for_audit(
        {
            "query": "a\x00b" + "x" * 1000,
            "ids": list(range(80)),
            "deep": {"a": {"b": {"c": {"d": 1}}}},
            "k" * 300: True,
            "lone": "\ud800",
        }
    )
    assert stored["query"].startswith("a\ufffdb") and stored["query"].endswith("…[cut]")
    assert len(stored["query"]) == 500 + len("…[cut]")
    assert stored["ids"][-1] == "…[cut]" and len(stored["ids"]) == 51
    assert stored["deep"] == {"a": {"b": {"c": "…[cut]"}}}
    assert stored["k" * 100] is True and stored["lone"] == "\ufffd"


def test_a_bug_in_a_tool_is_an_internal_error_that_reveals_nothing(monkeypatch, member, caplog):
    def broken(caller, values):
        raise RuntimeError("secret detail of the failure")

    monkeypatch.setitem(tools.TOOLS, "search", dataclasses.replace(tools.SEARCH, run=broken))
    outcome = run(member, "search", query="anything")
    assert outcome.is_error and outcome.payload["error"]["code"] == "internal_error"
    assert "secret detail" not in str(outcome.payload)
    assert "secret detail" in caplog.text  # logged with its stack, on the server only
    assert ToolCall.objects.get().error_code == "internal_error"


def test_a_call_that_cannot_be_audited_returns_no_result(monkeypatch, space, member):
    def refuse(**fields):
        raise RuntimeError("audit table unavailable")

    monkeypatch.setattr(ToolCall.objects, "create", refuse)
    outcome = run(member, "list_sources")
    assert outcome.is_error and outcome.payload["error"]["code"] == "internal_error"
    assert "spaces" not in outcome.payload


def test_debug_is_refused_by_the_service_to_someone_not_staff_and_answers_staff(
    space, owner, member, staff
):
    """Issue 49, item 2: the tool has no staff rule of its own; it passes on the service's."""
    ingest(owner, "ops.txt", "The platform operations team owns service reviews.", space=space)
    refused = run(member, "answer", query="Who owns service reviews?", mode="debug")
    assert refused.is_error
    assert refused.payload["error"]["code"] == "permission_denied"
    assert refused.payload["error"]["message"] == "Debug mode is for staff."
    assert ToolCall.objects.get(user=member).error_code == "permission_denied"
    answered = run(staff, "answer", query="Who owns service reviews?", mode="debug")
    assert not answered.is_error
    assert answered.payload["mode"] == "debug" and "trace" in answered.payload


def test_the_answer_tool_returns_the_release_with_its_place_in_the_answer_log(
    space, owner, member, log_key, monkeypatch
):
    """Issue 51, item 2: wherever a release is returned, `release.log` comes with it once
    the release is in the log (as GET /v1/runs/<id>). The log is integrated after the
    publication commits: here before the tool reads the answer back."""
    from audit.log import log_integrate

    ingest(owner, "ops.txt", "The platform operations team owns service reviews.", space=space)
    answer_create = tools.answer_create

    def answered_then_integrated(**kwargs):
        body = answer_create(**kwargs)
        log_integrate()
        return body

    monkeypatch.setattr(tools, "answer_create", answered_then_integrated)
    outcome = run(member, "answer", query="Who owns service reviews?")
    assert not outcome.is_error, outcome.payload
    release = outcome.payload["release"]
    assert release["log"]["index"] == 0 and release["log"]["tree_size"] == 1
    assert release["log"]["checkpoint"].startswith("koinon")  # the signed note
