"""Erasing an outside snapshot removes its text everywhere, as for a document (issue 50):
the stored file, the extractions and passages, the answers, messages, stream events and
traces that quoted it; the snapshot's record, which holds no text, stays."""

import pytest
from django.core.files.storage import default_storage

from answers.models import AnswerRun
from answers.pipeline.vocabulary import Plan
from audit.services import trace_write
from knowledge.erasure import TOMBSTONE
from outside.models import Snapshot
from outside.snapshots import snapshot_erase
from tests.answers.helpers import ask
from tests.answers.providers import ScriptedProvider
from tests.knowledge.test_erase import copies, in_traces
from tests.outside.channels import pages_channel
from tests.outside.helpers import LocalServer

SENTENCE = "Invoices are kept for seven years."
QUESTION = "How long are invoices kept?"


def select_kept(candidates):
    return {"facts": [{"fact_id": next(c.fact_id for c in candidates if "seven" in c.text)}]}


@pytest.mark.django_db(transaction=True)
def test_erasing_a_snapshot_removes_its_text_everywhere(space, owner, member, settings, tmp_path):
    settings.LOG_DIR = tmp_path / "traces"
    settings.KOINON_OUTSIDE_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with LocalServer(b"%PDF-1.4") as server:
        pages_channel(owner=owner, space=space, urls=[server.url("/page.html")])
        body = ask(
            member,
            QUESTION,
            provider=ScriptedProvider(
                [
                    lambda cs: {
                        "facts": [{"fact_id": next(c.fact_id for c in cs if "seven" in c.text)}]
                    }
                ],
                plan=Plan(standalone=QUESTION, searches=[QUESTION]),
            ),
            evidence_policy={"allowed_tools": ["fetch_url"]},
        )
    assert body["evidence"]["answer_status"] == "evidence_backed", body["evidence"]
    snapshot = Snapshot.objects.get(owner=member)
    # A trace line that quotes it, written by the real trace writer.
    trace_write(run_id=body["run_id"], lines=[{"step": "note", "quote": SENTENCE}])
    stored_file = snapshot.revision.file.name
    before = copies([SENTENCE])
    for where in (
        "knowledge_passage.text",
        "knowledge_extraction.text",
        "answers_answerrun.response",
        "answers_candidatefact.text",
        "audit_streamevent.data",
    ):
        assert where in before, where
    assert in_traces([SENTENCE])

    snapshot_erase(user=member, snapshot=snapshot, reason="fetched the wrong page")

    assert copies([SENTENCE]) == {}
    assert in_traces([SENTENCE]) == []
    assert not default_storage.exists(stored_file)
    assert Snapshot.objects.filter(pk=snapshot.pk).exists()
    # The sealed answer now holds the erasure's tombstone where the quote stood.
    response = AnswerRun.objects.get(pk=body["run_id"]).response
    assert TOMBSTONE in response["answer"]["text"]
