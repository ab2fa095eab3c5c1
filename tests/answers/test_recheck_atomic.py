"""The recheck runs inside the publication transaction, under row locks, so a revocation
that is in flight while an answer is sealed is never overtaken (issue 10, item 7)."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone
from guardian.models import UserObjectPermission

from answers.models import Citation
from answers.pipeline.vocabulary import Plan
from core.models import ApiKey
from core.services import api_key_create
from tests.answers.helpers import ask, ingest
from tests.answers.providers import ScriptedProvider

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "The platform operations team owns service reviews."
QUESTION = "Who owns service reviews?"
HOLD_SECONDS = 0.6


def select_first(candidates):
    return {"facts": [{"fact_id": candidates[0].fact_id}]}


def in_flight(change) -> threading.Thread:
    """Run `change` in another connection's transaction and keep it open HOLD_SECONDS after
    its write, as a revocation committing while the answer is being sealed would."""
    written = threading.Event()

    def run() -> None:
        try:
            with transaction.atomic():
                change()
                written.set()
                time.sleep(HOLD_SECONDS)
        finally:
            written.set()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    assert written.wait(10)
    return thread


def test_a_key_revoked_while_the_answer_is_sealed_stops_it(space, owner, member):
    ingest(owner, space, "operations.txt", TEXT)
    issued = api_key_create(user=member)
    threads = []

    def revoke(attempt: int) -> None:
        threads.append(
            in_flight(
                lambda: ApiKey.objects.filter(pk=issued.api_key.pk).update(
                    revoked_at=timezone.now()
                )
            )
        )

    provider = ScriptedProvider([select_first], plan=Plan(QUESTION, [QUESTION]), on_select=revoke)
    body = ask(member, QUESTION, provider=provider, api_key=issued.api_key)
    threads[0].join()
    assert body["evidence"]["answer_status"] == "abstained"
    assert "access_denied" in body["quality"]["issues"]
    assert not Citation.objects.filter(run_id=body["run_id"]).exists()


def test_a_membership_removed_while_the_answer_is_sealed_stops_it(space, owner, member):
    ingest(owner, space, "operations.txt", TEXT)
    threads = []

    def remove(attempt: int) -> None:
        threads.append(
            in_flight(
                lambda: UserObjectPermission.objects.filter(
                    user=member, object_pk=str(space.pk)
                ).delete()
            )
        )

    provider = ScriptedProvider([select_first], plan=Plan(QUESTION, [QUESTION]), on_select=remove)
    body = ask(member, QUESTION, provider=provider)
    threads[0].join()
    assert body["evidence"]["answer_status"] == "abstained"
    assert "access_denied" in body["quality"]["issues"]


def test_an_answer_sealed_before_a_revocation_stays_sealed(space, owner, member):
    ingest(owner, space, "operations.txt", TEXT)
    issued = api_key_create(user=member)
    provider = ScriptedProvider([select_first], plan=Plan(QUESTION, [QUESTION]))
    body = ask(member, QUESTION, provider=provider, api_key=issued.api_key)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    ApiKey.objects.filter(pk=issued.api_key.pk).update(revoked_at=timezone.now())
    assert Citation.objects.filter(run_id=body["run_id"]).count() == 1
