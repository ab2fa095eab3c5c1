from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from core.embedded import EmbeddedRedis
from core.health import ComponentStatus, check_redis_and_workers
from koinon.celery import app as celery_app
from tests.guards import no_hang
from tests.helpers import client_for
from tests.knowledge.test_documents import wait_for_extraction
from tests.services import daphne_process

pytestmark = pytest.mark.django_db(transaction=True)


def test_health_reports_every_component_ok_with_a_worker(celery_worker):
    response = APIClient().get("/v1/health")
    assert response.status_code == 200, response.json()
    components = response.json()["components"]
    assert set(components) == {
        "database",
        "vector",
        "redis",
        "celery",
        "extractions",
        "embeddings",
        "runs",
        "answer_log",
    }
    assert all(component["status"] == "ok" for component in components.values())
    assert components["vector"]["detail"].startswith("pgvector 0.")


def test_health_reports_a_stopped_redis_as_failed(settings, tmp_path, celery_worker):
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        settings.REDIS_URL = f"unix://{redis.socket}"
        assert APIClient().get("/v1/health").json()["components"]["redis"]["status"] == "ok"
        redis.stop()
        response = APIClient().get("/v1/health")
    finally:
        redis.stop()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "failed"
    assert body["components"]["redis"] == {"status": "failed", "detail": "unreachable"}
    # The other components are judged on their own; worker heartbeats live in Redis.
    assert body["components"]["database"]["status"] == "ok"
    assert body["components"]["celery"] == {
        "status": "failed",
        "detail": "unknown: redis unreachable",
    }


def test_celery_check_fails_without_a_worker_heartbeat_and_without_redis(settings, tmp_path):
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    try:
        settings.REDIS_URL = f"unix://{redis.socket}"  # no worker writes heartbeats here
        assert check_redis_and_workers()[1] == ComponentStatus(
            "celery", False, "no worker heartbeat"
        )
        redis.stop()
        assert check_redis_and_workers()[1] == ComponentStatus(
            "celery", False, "unknown: redis unreachable"
        )
    finally:
        redis.stop()


def test_fifty_parallel_health_calls_answer_fast_and_an_upload_after_them_is_extracted(
    test_database_name, logs_dir, celery_worker, space, owner
):
    # A server of its own: the shared one would keep this test's permission caches
    # (content type ids) into later tests, whose database flush renumbers them.
    with daphne_process(test_database_name, logs_dir / "daphne-health.log") as server:
        health_storm_then_upload(server, space, owner)


def health_storm_then_upload(live_server_url: str, space, owner) -> None:
    def health(_: int) -> int:
        # The client's timeout guards against a hang; how fast is bench/'s business.
        return httpx.get(f"{live_server_url}/v1/health", timeout=60).status_code

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(health, range(50)))
    assert answers == [200] * 50

    key = client_for(owner)._credentials["HTTP_AUTHORIZATION"]
    upload = httpx.post(
        f"{live_server_url}/v1/documents",
        headers={"Authorization": key},
        data={"space": str(space.pk)},
        files={"file": ("after.txt", b"The health storm is over.\n")},
        timeout=30,
    )
    assert upload.status_code == 202, upload.text
    extractions = wait_for_extraction(upload.json()["revision"])
    assert [e.status for e in extractions] == ["admitted", "admitted"]


def test_an_upload_waits_only_a_bounded_time_for_a_busy_broker_pool(
    settings, celery_worker, space, owner
):
    settings.KOINON_ENQUEUE_TIMEOUT = 0.5
    # What twelve concurrent broadcasts did: every pooled broker connection taken.
    pool = celery_app.pool
    held = [pool.acquire(block=True, timeout=5) for _ in range(pool.limit)]
    try:
        with no_hang():  # bounded by KOINON_ENQUEUE_TIMEOUT, not by the pool's own wait
            response = client_for(owner).post(
                "/v1/documents",
                {
                    "file": SimpleUploadedFile("busy.txt", b"Queued while the pool was full.\n"),
                    "space": space.pk,
                },
                format="multipart",
            )
    finally:
        for connection in held:
            connection.release()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "extraction_delayed"


def test_the_live_daphne_server_answers_over_http(live_server_url):
    response = httpx.get(f"{live_server_url}/v1/health", timeout=10)
    assert response.headers["content-type"] == "application/json"
    assert response.json()["components"]["database"]["status"] == "ok"
    assert response.json()["components"]["vector"]["status"] == "ok"


@pytest.mark.django_db
def test_health_reports_the_model_endpoint_of_the_openai_provider(settings, fake):
    settings.KOINON_MODEL_PROVIDER = "openai"
    settings.KOINON_LLM_BASE_URL = fake.url
    from core.health import check_model

    assert check_model() == ComponentStatus("model", True, "reachable")
    fake.models_status = 500
    assert check_model() == ComponentStatus("model", False, "HTTP 500")
    settings.KOINON_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert check_model() == ComponentStatus("model", False, "unreachable")
    response = APIClient().get("/v1/health")
    assert response.status_code == 503
    assert response.json()["components"]["model"]["status"] == "failed"
    assert "SECRET-PROVIDER-DETAIL" not in response.content.decode()


def test_the_host_scope_reports_what_this_host_needs_to_serve_and_nothing_shared():
    """What a load balancer checks: a condition every host shares (no worker, a stuck run)
    must not take every host out of rotation at once."""
    response = APIClient().get("/v1/health", {"scope": "host"})
    assert response.status_code == 200, response.json()
    assert set(response.json()["components"]) == {"database", "vector", "redis"}
    everything = APIClient().get("/v1/health", {"scope": "all"}).json()["components"]
    assert {"celery", "runs", "extractions"} <= set(everything)


def test_the_host_scope_reports_redis_away_as_degraded_and_stays_in_rotation(settings):
    """Redis away (a Sentinel failover) is the same for every host: it must not empty the
    balancer; the full report still fails."""
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens on the discard port
    response = APIClient().get("/v1/health", {"scope": "host"})
    assert response.status_code == 200
    assert response.json()["components"]["redis"] == {
        "status": "degraded",
        "detail": "unreachable",
    }
    assert APIClient().get("/v1/health").status_code == 503


def test_the_host_scope_fails_when_this_host_cannot_reach_its_database(settings):
    from django.db import connection

    real = connection.cursor

    def unreachable(*args, **kwargs):
        raise OSError("connection refused")

    connection.cursor = unreachable
    try:
        response = APIClient().get("/v1/health", {"scope": "host"})
    finally:
        connection.cursor = real
    assert response.status_code == 503
    assert response.json()["components"]["database"]["status"] == "failed"


def test_an_unknown_health_scope_is_a_typed_422():
    response = APIClient().get("/v1/health", {"scope": "cluster"})
    assert response.status_code == 422
    assert response.json()["error"]["fields"]["scope"]


def test_a_degraded_component_keeps_the_server_healthy():
    assert ComponentStatus("database_replica", True, "down", degraded=True).as_dict() == {
        "status": "degraded",
        "detail": "down",
    }


# pgvector's distance function replaced inside the test's transaction (rolled back with it):
# raising, as a missing library would, or ending its backend, as a build for instructions
# this CPU lacks does (issue 46).
DISTANCE_RAISES = """
CREATE OR REPLACE FUNCTION l2_distance(vector, vector) RETURNS float8 LANGUAGE plpgsql AS
$$ BEGIN RAISE EXCEPTION 'could not load library vector.so'; END $$
"""
DISTANCE_KILLS_ITS_BACKEND = """
CREATE OR REPLACE FUNCTION l2_distance(vector, vector) RETURNS float8 LANGUAGE sql AS
$$ SELECT pg_terminate_backend(pg_backend_pid())::int::float8 $$
"""


@pytest.mark.django_db
def test_a_database_that_fails_vector_operations_is_not_healthy_even_for_the_balancer():
    from django.db import connection

    assert APIClient().get("/v1/health?scope=host").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute(DISTANCE_RAISES)
    response = APIClient().get("/v1/health?scope=host")
    assert response.status_code == 503
    components = response.json()["components"]
    assert components["database"]["status"] == "ok"  # reachable: the vectors fail
    assert components["vector"] == {"status": "failed", "detail": "vector operation failed"}


@pytest.mark.django_db
def test_a_database_whose_process_dies_at_a_vector_distance_is_reported_so():
    from django.db import connection

    from core.health import check_database

    with connection.cursor() as cursor:
        cursor.execute(DISTANCE_KILLS_ITS_BACKEND)
    database, vector = check_database()
    assert database.ok
    assert vector == ComponentStatus(
        "vector", False, "vector operation failed: the database process died"
    )
