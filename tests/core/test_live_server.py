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


def _backends() -> set[int]:
    """The other client backends on this database now: pg_stat_activity is shared memory,
    current at once (unlike the statistics counters)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


def _sessions_opened() -> int:
    """Connections PostgreSQL has counted for this database so far. A backend adds itself
    when it flushes its statistics, and always before it leaves pg_stat_activity."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_the_web_process_reuses_pooled_connections(live_server_url, space, member):
    """Without the pool every request (a thread of its own under ASGI) would start a new
    PostgreSQL backend: 20 requests, 20 sessions."""
    key = client_for(member)._credentials["HTTP_AUTHORIZATION"]
    with httpx.Client(base_url=live_server_url, headers={"Authorization": key}) as client:
        assert client.get("/v1/spaces").status_code == 200  # the pool holds a connection now
        known = _backends()
        before = _sessions_opened()
        for _ in range(20):
            assert client.get("/v1/spaces").status_code == 200
        # Every session opened since is either still open (a backend not known before) or
        # ended, and then counted: backends still open are read first, so none is missed
        # (one may be counted twice, never zero times).
        still_open = _backends() - known
        opened = _sessions_opened() - before + len(still_open)
        assert opened <= 3
