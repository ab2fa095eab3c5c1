import json

import pytest
from django.conf import settings

from core.services import api_key_create
from tests.answers.helpers import ask

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_run_writes_a_json_lines_trace_after_commit(library, member):
    issued = api_key_create(user=member)
    body = ask(member, "Who owns service reviews?", api_key=issued.api_key)
    path = settings.LOG_DIR / f"{body['run_id']}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines][:2] == ["plan", "retrieval"]
    assert lines[-1]["step"] == "publication"
    assert all(line["run_id"] == body["run_id"] and line["generation"] == 1 for line in lines)
    text = path.read_text()
    assert issued.secret not in text and issued.api_key.prefix not in text
