"""Dataset values in answers carry the filter that chose their rows (issue 10, item 4)."""

import json

import pytest

from answers.models import CandidateFact
from answers.pipeline.providers.extractive import ExtractiveProvider
from answers.pipeline.vocabulary import Plan
from datasets.services import dataset_upload
from tests.answers.helpers import ask
from tests.answers.test_openai_provider import data, model, provider_for, selects

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


# --- values that answer what was asked (issue 26) ----------------------------------------

CUSTOMERS = b"customer,amount,day\nzeta,99,2025-03-01\nalpha,4000,2024-06-30\n"
ZETA = "What is the total amount for customer zeta?"


@pytest.fixture
def customers(space, owner):
    return dataset_upload(
        user=owner, space=space, filename="orders.csv", data=CUSTOMERS, table="orders"
    )


def test_an_upload_keeps_a_dictionary_of_its_text_columns(customers):
    assert customers.dictionary == {"customer": ["alpha", "zeta"]}


def test_an_unquoted_name_restricts_the_value_and_the_label_shows_it(customers, member):
    body = ask(member, ZETA, evidence_policy=POLICY)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "SUM(orders.amount) WHERE orders.customer = 'zeta' = 99" in body["answer"]["text"]
    assert "4,099" not in body["answer"]["text"]


def test_a_name_that_is_no_value_releases_no_value(customers, member):
    body = ask(member, "What is the total amount for customer omega?", evidence_policy=POLICY)
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["cards"] == [] and "4,099" not in json.dumps(body)


def test_a_question_without_a_restriction_gets_the_whole_total(customers, member):
    body = ask(member, "What is the total amount of all orders?", evidence_policy=POLICY)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "SUM(orders.amount) = 4,099" in body["answer"]["text"]


def test_a_year_restricts_a_date_column(customers, member):
    body = ask(member, "What was the total amount in 2025?", evidence_policy=POLICY)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    [card] = body["answer"]["cards"]
    assert "WHERE orders.day >=" in card["label"] and "2025-01-01" in card["label"]
    assert "2026-01-01" in card["label"] and card["value"] == 99


def test_a_comparison_restricts_a_numeric_column(customers, member):
    body = ask(member, "What is the total amount of orders over 1,000?", evidence_policy=POLICY)
    [card] = body["answer"]["cards"]
    assert card["label"] == "SUM(orders.amount) WHERE orders.amount > 1000"
    assert card["value"] == 4000


class UnrestrictedPlan(ExtractiveProvider):
    """A provider that plans the unfiltered total for a question about one customer."""

    def plan(self, *, question, history, datasets) -> Plan:
        [dataset] = datasets
        query = {
            "dataset_id": dataset.dataset_id,
            "snapshot_id": dataset.snapshot_id,
            "sql": 'SELECT SUM("amount") FROM "orders"',
            "restrictions": [],
            "part": 0,
        }
        return Plan(
            standalone=question, searches=[question], dataset_queries=[query], question=question
        )


def assert_unanswered_for_lack_of_restriction(body: dict, run_id: str) -> None:
    assert body["evidence"]["answer_status"] == "abstained"
    assert "value_restriction_missing" in body["quality"]["issues"]
    assert body["answer"]["cards"] == [] and "4,099" not in json.dumps(body)
    [value] = CandidateFact.objects.filter(run_id=run_id, kind="value")
    assert value.value == 4099 and value.source["unmet"] == [
        {"column": "customer", "op": "=", "value": "zeta"}
    ]


def test_a_restriction_the_sql_lacks_leaves_the_part_unanswered(customers, member):
    body = ask(member, ZETA, evidence_policy=POLICY, provider=UnrestrictedPlan())
    assert_unanswered_for_lack_of_restriction(body, body["run_id"])


def _select_values(request: dict) -> dict:
    return {
        "facts": [
            {"fact_id": c["fact_id"], "start": None, "end": None}
            for c in data(request)["candidates"]
            if c["kind"] == "value"
        ]
    }


def test_the_openai_provider_releases_the_restricted_value(customers, member, fake):
    plan = {
        "refers_back": False,
        "standalone": ZETA,
        "searches": ["total amount customer zeta"],
        "comparison": False,
    }
    fake.replies = [model(plan=lambda request: plan, select=[_select_values])]
    body = ask(member, ZETA, evidence_policy=POLICY, provider=provider_for(fake))
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert "SUM(orders.amount) WHERE orders.customer = 'zeta' = 99" in body["answer"]["text"]


def test_the_openai_provider_cannot_release_a_value_without_the_restriction(
    customers, member, fake
):
    # The model split the question: its first part names no customer, so the SQL planned
    # for it has no WHERE; the question names one, so that value answers nothing asked.
    plan = {
        "refers_back": False,
        "standalone": ZETA,
        "comparison": False,
        "searches": ["total amount", "customer zeta"],
    }
    fake.replies = [model(plan=lambda request: plan, select=[_select_values])]
    body = ask(member, ZETA, evidence_policy=POLICY, provider=provider_for(fake))
    assert_unanswered_for_lack_of_restriction(body, body["run_id"])
    assert all(c["kind"] != "value" for r in selects(fake) for c in data(r)["candidates"])


def _finance_snapshot(staff, *, reader=None):
    """A snapshot in another space (Finance), read by `reader` when given, holding 777."""
    from knowledge.services import space_create, space_member_set

    finance = space_create(name="Finance", created_by=staff)
    if reader is not None:
        space_member_set(space=finance, username=reader.username, role="reader")
    return dataset_upload(
        user=staff,
        space=finance,
        filename="pay.csv",
        table="orders",
        data=b"customer,amount\nzeta,777\n",
    )


class PlansASnapshot(ExtractiveProvider):
    """A provider whose plan names a snapshot of its choosing: output, not authority."""

    def __init__(self, snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def plan(self, *, question, history, datasets) -> Plan:
        query = {
            "dataset_id": self.snapshot.dataset_id,
            "snapshot_id": self.snapshot.pk,
            "part": 0,
            "sql": 'SELECT SUM("amount") FROM "orders"',
            "restrictions": [],
        }
        return Plan(standalone=question, searches=[question], dataset_queries=[query])


def test_a_plan_naming_another_spaces_snapshot_reads_nothing(customers, staff, owner, member):
    """The one unscoped lookup (issue 27): a provider's plan is output, not authority."""
    from datasets.models import GovernedQuery

    hidden = _finance_snapshot(staff)
    provider = PlansASnapshot(hidden)
    body = ask(member, "What is the total amount?", evidence_policy=POLICY, provider=provider)
    assert body["evidence"]["answer_status"] == "abstained"
    assert "777" not in json.dumps(body)
    assert [o["code"] for o in body["evidence"]["outcomes"]] == ["no_relevant_hit"]
    assert not GovernedQuery.objects.filter(snapshot=hidden).exists()


def test_a_plan_naming_a_snapshot_of_a_space_the_run_did_not_choose_reads_nothing(
    customers, staff, owner, member
):
    """Visible but not chosen: the run searches only the spaces it was asked to."""
    from datasets.models import GovernedQuery

    other = _finance_snapshot(staff, reader=member)
    body = ask(
        member,
        "What is the total amount?",
        evidence_policy=POLICY,
        provider=PlansASnapshot(other),
        space_ids=[customers.dataset.space_id],
    )
    assert body["evidence"]["answer_status"] == "abstained"
    assert "777" not in json.dumps(body)
    assert not GovernedQuery.objects.filter(snapshot=other).exists()


def test_the_governed_run_refuses_a_snapshot_outside_its_readers_scope(customers, outsider):
    from core.errors import NotFoundError
    from datasets.services import governed_query_run
    from knowledge.scope import access_scope_build

    with pytest.raises(NotFoundError):
        governed_query_run(
            scope=access_scope_build(user=outsider),
            snapshot=customers,
            sql='SELECT SUM("amount") FROM "orders"',
        )
