import time

import httpx
import pytest

from tests.helpers import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_api_key_works_against_the_live_server(live_server_url, space, member, outsider):
    member_key = client_for(member)._credentials["HTTP_AUTHORIZATION"]
    outsider_key = client_for(outsider)._credentials["HTTP_AUTHORIZATION"]

    seen = httpx.get(f"{live_server_url}/v1/spaces", headers={"Authorization": member_key})
    assert seen.status_code == 200
    assert [row["name"] for row in seen.json()["results"]] == ["Operations"]

    hidden = httpx.get(
        f"{live_server_url}/v1/spaces/{space.pk}", headers={"Authorization": outsider_key}
    )
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "not_found"

    anonymous = httpx.get(f"{live_server_url}/v1/spaces")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"


def test_unknown_api_paths_get_a_json_404(live_server_url):
    response = httpx.get(f"{live_server_url}/v1/no-such-endpoint")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def _sessions_opened() -> int:
    """Connections PostgreSQL has accepted for this database so far."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_the_web_process_reuses_pooled_connections(live_server_url, space, member):
    """Without the pool every request (a thread of its own under ASGI) would start a new
    PostgreSQL backend: 20 requests, 20 sessions."""
    key = client_for(member)._credentials["HTTP_AUTHORIZATION"]
    with httpx.Client(base_url=live_server_url, headers={"Authorization": key}) as client:
        client.get("/v1/spaces")  # the pool may open its connections now
        time.sleep(1.5)  # a backend reports its session within a second
        before = _sessions_opened()
        for _ in range(20):
            assert client.get("/v1/spaces").status_code == 200
        time.sleep(1.5)
        assert _sessions_opened() - before <= 3
