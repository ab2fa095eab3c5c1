"""The browser's EventSource authenticates with the session cookie (issue 12): the run's
owner reads its events, anyone else gets 404, and unsafe API calls with a session still
need the CSRF token."""

import pytest

from answers.pipeline.lifecycle import answer_create
from answers.pipeline.request import answer_request_parse
from tests.answers.helpers import ingest
from tests.answers.test_streaming import parse
from tests.chat.live import signed_in

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "The platform operations team owns service reviews."


@pytest.fixture
def answered(space, owner, member) -> dict:
    ingest(owner, space, "ops.txt", TEXT)
    return answer_create(user=member, request=answer_request_parse({"query": "Who owns reviews?"}))


def test_the_owner_reads_the_run_events_with_the_session_cookie(live_server_url, answered):
    client = signed_in(live_server_url, "member", "test-password-1")
    response = client.get(
        f"/v1/runs/{answered['run_id']}/events",
        params={"stream_version": "1"},
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    events = parse(response.text)
    assert events[0]["event"] == "started" and events[-1]["event"] == "completed"
    assert events[-1]["data"]["payload"]["result"] == answered
    assert client.get(f"/v1/runs/{answered['run_id']}").json() == answered


def test_someone_elses_session_gets_404_for_the_events(live_server_url, answered, outsider):
    client = signed_in(live_server_url, "outsider", "test-password-1")
    response = client.get(f"/v1/runs/{answered['run_id']}/events", params={"stream_version": "1"})
    assert response.status_code == 404
    assert TEXT not in response.text


def test_unsafe_api_calls_with_a_session_need_the_csrf_token(live_server_url, answered):
    client = signed_in(live_server_url, "member", "test-password-1")
    refused = client.post(f"/v1/runs/{answered['run_id']}/retry")
    assert refused.status_code == 403
    assert client.get(f"/v1/runs/{answered['run_id']}").json()["generation"] == 1
    accepted = client.post(
        f"/v1/runs/{answered['run_id']}/retry",
        headers={"X-CSRFToken": client.cookies["csrftoken"], "Referer": live_server_url + "/"},
    )
    assert accepted.status_code == 200 and accepted.json()["generation"] == 2


def test_an_anonymous_event_stream_is_refused(live_server_url, answered):
    import httpx

    response = httpx.get(f"{live_server_url}/v1/runs/{answered['run_id']}/events")
    assert response.status_code in {401, 403}
