"""Dataset values in answers carry the filter that chose their rows (issue 10, item 4)."""

import pytest

from datasets.services import dataset_upload
from tests.answers.conftest import ask

pytestmark = pytest.mark.django_db

ORDERS = b"invoice,amount,customer\nA-1,1250,acme\nA-2,2750,acme\nA-3,99,zeta\n"
POLICY = {"allowed_tools": ["dataset_query"]}


@pytest.fixture
def orders(space, owner):
    return dataset_upload(
        user=owner, space=space, filename="orders.csv", data=ORDERS, table="orders"
    )


def test_a_filtered_total_is_released_with_its_filter(orders, member):
    body = ask(member, 'What is the total amount for customer "zeta"?', evidence_policy=POLICY)

    assert body["evidence"]["answer_status"] == "evidence_backed"
    label = "SUM(orders.amount) WHERE orders.customer = 'zeta'"
    assert f"{label} = 99" in body["answer"]["text"]
    [card] = body["answer"]["cards"]
    assert card["label"] == label
    assert "WHERE orders.customer = 'zeta'" in card["lineage"]


def test_a_total_over_no_rows_is_no_evidence(orders, member):
    body = ask(member, 'What is the total amount for customer "nobody"?', evidence_policy=POLICY)

    assert body["evidence"]["answer_status"] != "evidence_backed"
    assert body["answer"]["cards"] == []
    assert "None" not in body["answer"]["text"]
