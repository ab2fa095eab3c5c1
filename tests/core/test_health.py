import httpx
import pytest
from celery import Celery
from rest_framework.test import APIClient

from core.embedded import EmbeddedRedis
from core.health import ComponentStatus, check_celery

pytestmark = pytest.mark.django_db(transaction=True)


def test_health_reports_every_component_ok_with_a_worker(celery_worker):
    response = APIClient().get("/v1/health")
    assert response.status_code == 200, response.json()
    components = response.json()["components"]
    assert set(components) == {"database", "vector", "redis", "celery"}
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
    # The other components are judged on their own.
    assert body["components"]["database"]["status"] == "ok"
    assert body["components"]["celery"]["status"] == "ok"


def test_celery_check_fails_without_a_worker_and_without_a_broker(settings, tmp_path):
    settings.KOINON_HEALTH_TIMEOUT = 0.5
    redis = EmbeddedRedis(tmp_path / "redis")
    redis.start()
    lonely = Celery("lonely", broker=f"redis+socket://{redis.socket}", set_as_current=False)
    try:
        assert check_celery(lonely) == ComponentStatus("celery", False, "no worker answered")
        redis.stop()
        assert check_celery(lonely) == ComponentStatus("celery", False, "broker unreachable")
    finally:
        redis.stop()
        lonely.close()


def test_the_live_daphne_server_answers_over_http(live_server_url):
    response = httpx.get(f"{live_server_url}/v1/health", timeout=10)
    assert response.headers["content-type"] == "application/json"
    assert response.json()["components"]["database"]["status"] == "ok"
    assert response.json()["components"]["vector"]["status"] == "ok"
