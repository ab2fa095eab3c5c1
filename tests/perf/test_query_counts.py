"""Query counts (issue 16): every list endpoint and /v1/answer run a fixed number of SQL
statements, whatever the number of rows they return (no N+1). The numbers are exact:
a change that adds a query per page or per answer step fails here and must say why."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from answers.models import AnswerRun
from conversations.services import share_create
from datasets.services import dataset_upload
from knowledge.curation import proposal_create
from memory.services import correction_create
from tests.answers.helpers import ingest
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

CSV = b"invoice,amount\nA-1,1250\nA-2,2750\n"


def add(kind: str, index: int, *, space, owner, member) -> None:
    if kind == "spaces":
        from knowledge.services import space_create, space_member_set

        made = space_create(
            name=f"Space {index}", created_by=make_user(f"staff{index}", staff=True)
        )
        space_member_set(space=made, username=member.username, role="reader")
    elif kind == "documents":
        ingest(owner, space, f"doc{index}.txt", f"Document number {index} about reviews.")
    elif kind == "datasets":
        dataset_upload(
            user=owner, space=space, filename=f"d{index}.csv", data=CSV, table=f"orders{index}"
        )
    elif kind == "proposals":
        proposal_create(user=member, space=space, body=f"Text {index}", title=f"Entry {index}")
    elif kind == "conversations":
        client_for(member).post("/v1/conversations", {"title": f"c{index}"}, format="json")
    elif kind == "memory":
        correction_create(user=member, text=f"Reviews note {index}", scope="personal")


LISTS = {
    "spaces": "/v1/spaces",
    "documents": "/v1/documents",
    "datasets": "/v1/datasets",
    "proposals": "/v1/knowledge/proposals",
    "conversations": "/v1/conversations",
    "memory": "/v1/memory",
}


def count(client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, response.content
    return len(captured)


@pytest.mark.parametrize("kind", list(LISTS))
def test_a_list_costs_the_same_queries_for_one_row_and_for_five(kind, space, owner, member):
    client = client_for(member)
    add(kind, 0, space=space, owner=owner, member=member)
    client.get(LISTS[kind])  # content types and other per-process caches warm
    one = count(client, LISTS[kind])
    for index in range(1, 5):
        add(kind, index, space=space, owner=owner, member=member)
    five = count(client, LISTS[kind])
    assert (kind, five) == (kind, one)
    assert (kind, one) == (kind, EXACT[kind])


# The API key lookup and the page itself; an API key's last use is written at most once a
# minute (not within a test).
EXACT: dict[str, int] = dict.fromkeys(LISTS, 2)


def test_shares_list_costs_the_same_for_one_share_and_for_three(space, owner, member):
    client = client_for(member)
    conversation_id = client.post("/v1/conversations", {"title": "t"}, format="json").json()["id"]
    from answers.models import Conversation

    conversation = Conversation.objects.get(pk=conversation_id)
    share_create(user=member, conversation=conversation, username=owner.username)
    path = f"/v1/conversations/{conversation_id}/shares"
    client.get(path)
    one = count(client, path)
    for index in range(2):
        make_user(f"friend{index}")
        share_create(user=member, conversation=conversation, username=f"friend{index}")
    assert count(client, path) == one == EXACT_SHARES


EXACT_SHARES = 3  # the key, the conversation (its selector), the page


def test_an_answer_costs_a_fixed_number_of_queries(space, owner, member):
    """The extractive answer to a one-part question: measured twice on a warm process,
    the second time with more documents in the space (retrieval is bounded by `limit`)."""
    ingest(owner, space, "ops.txt", "The platform operations team owns service reviews.")
    client = client_for(member)
    question = {"query": "Who owns service reviews?"}
    client.post("/v1/answer", question, format="json")  # warm
    with CaptureQueriesContext(connection) as first:
        body = client.post("/v1/answer", question, format="json").json()
    assert body["evidence"]["answer_status"] == "evidence_backed"
    for index in range(3):
        ingest(owner, space, f"more{index}.txt", f"Service reviews happen every quarter {index}.")
    with CaptureQueriesContext(connection) as second:
        client.post("/v1/answer", question, format="json")
    assert AnswerRun.objects.count() == 3
    assert len(first) == EXACT_ANSWER, len(first)
    assert len(second) == len(first)
    # The gathering reads the permission rows once (the run's AccessScope: the visible
    # spaces' ids); the recheck reads them again, in its own statements.
    permission_reads = [q["sql"] for q in first.captured_queries if "guardian_" in q["sql"]]
    assert len(permission_reads) == 1 + RECHECK_PERMISSION_READS, permission_reads


EXACT_ANSWER = 63  # see docs/performance.md for what they are
RECHECK_PERMISSION_READS = 3  # its fresh scope, the user's and the groups' locked rows


def test_a_conversation_reads_in_the_same_queries_for_one_answer_and_for_three(
    space, owner, member
):
    ingest(owner, space, "ops.txt", "The platform operations team owns service reviews.")
    client = client_for(member)
    first = client.post("/v1/answer", {"query": "Who owns service reviews?"}, format="json")
    conversation_id = AnswerRun.objects.get(pk=first.json()["run_id"]).conversation_id
    path = f"/v1/conversations/{conversation_id}"
    client.get(path)
    one = count(client, path)
    for _ in range(2):
        client.post(
            "/v1/answer",
            {"query": "Who owns service reviews?", "conversation_id": conversation_id},
            format="json",
        )
    assert len(client.get(path).json()["messages"]) == 6
    assert count(client, path) == one == EXACT_CONVERSATION


EXACT_CONVERSATION = 8  # key, conversation, releases, runs, events, documents, messages,
# and the releases' places in the answer log (one read for all: `bodies_with_log`)
