"""Issue 27 (6): PostgreSQL away for a moment (a restart, a failover). A real Daphne
whose pool reaches the test database through a TCP proxy this test cuts and restores:
while it is cut, requests get a typed 503 with Retry-After — not a 30-second hang and a
500 — and health says so, with the pool; once it is back the same process serves again,
with no restart."""

import contextlib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from core.services import api_key_create
from tests.guards import no_hang
from tests.helpers import make_user
from tests.services import daphne_process

pytestmark = pytest.mark.django_db(transaction=True)


class Proxy:
    """Forwards loopback TCP connections to PostgreSQL; `cut` closes every live one and
    refuses new ones (as a stopped server does), `restore` listens again on the port."""

    def __init__(self, target: str | tuple[str, int]):
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.live: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with contextlib.suppress(OSError):  # shutdown wakes the thread blocked in accept()
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for sock in list(self.live):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.live.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            family = socket.AF_UNIX if isinstance(self.target, str) else socket.AF_INET
            upstream = socket.socket(family)
            upstream.connect(self.target)
            self.live += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.close()


def _target() -> str | tuple[str, int]:
    params = connection.get_connection_params()
    host = params.get("host") or ""
    if host.startswith("/"):
        return str(Path(host) / f".s.PGSQL.{params.get('port') or 5432}")
    return (host, int(params.get("port") or 5432))


def test_a_database_restart_is_a_fast_503_and_the_same_process_recovers(
    test_database_name, logs_dir
):
    key = api_key_create(user=make_user("member")).secret
    proxy = Proxy(_target())
    params = connection.get_connection_params()
    url = (
        f"postgresql://{params.get('user') or 'postgres'}@127.0.0.1:{proxy.port}/"
        f"{test_database_name}"
    )
    env = {"DATABASE_URL": url, "KOINON_DB_POOL": "4", "KOINON_DB_POOL_TIMEOUT": "2"}
    if settings.DATABASES["default"]["PASSWORD"]:
        env["PGPASSWORD"] = settings.DATABASES["default"]["PASSWORD"]
    headers = {"Authorization": f"Bearer {key}"}
    with daphne_process(test_database_name, logs_dir / "daphne-outage.log", env) as base:
        client = httpx.Client(base_url=base, headers=headers, timeout=60)
        assert client.get("/v1/spaces").status_code == 200
        health = client.get("/v1/health").json()
        assert health["components"]["database_pool"]["status"] == "ok"
        assert "of 4 open" in health["components"]["database_pool"]["detail"]

        proxy.cut()
        with no_hang(120):
            away = client.get("/v1/spaces")
            health = client.get("/v1/health")
        assert away.status_code == 503, away.text
        assert away.json()["error"]["code"] == "database_unavailable"
        assert away.headers["Retry-After"] == "5"
        assert health.status_code == 503
        assert health.json()["components"]["database"]["status"] == "failed"

        proxy.restore()
        with no_hang(120):
            while (back := client.get("/v1/spaces")).status_code == 503:
                time.sleep(0.5)
        assert back.status_code == 200, back.text
        assert client.get("/v1/health").json()["components"]["database"]["status"] == "ok"
    proxy.cut()


@pytest.mark.parametrize(("path", "kind"), [("/c/1/", "text/html"), ("/v1/x", "application/json")])
def test_pages_and_api_views_answer_503_while_the_database_is_away(path, kind):
    from django.db import OperationalError
    from django.http import HttpResponse
    from django.test import RequestFactory

    from core.errors import DatabaseUnavailableMiddleware

    middleware = DatabaseUnavailableMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get(path)
    response = middleware.process_exception(request, OperationalError("connection refused"))
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response["Content-Type"].startswith(kind)
    assert middleware.process_exception(request, ValueError("a bug")) is None  # still a 500


HEADINGS = {
    "en": "koinon cannot reach its database",
    "de": "koinon erreicht seine Datenbank nicht",
    "fr": "koinon ne peut pas joindre sa base de données",
    "ja": "koinon がデータベースに接続できません",
}


@pytest.mark.parametrize("language", sorted(HEADINGS))
def test_the_database_page_is_a_page_with_a_way_back_in_the_persons_language(language):
    from django.db import OperationalError
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.utils import translation

    from core.errors import DATABASE_AWAY, DatabaseUnavailableMiddleware

    middleware = DatabaseUnavailableMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get("/c/1/", HTTP_REFERER="http://testserver/spaces/")
    with translation.override(language):
        page = middleware.process_exception(request, OperationalError("refused"))
        message = translation.gettext(DATABASE_AWAY)
    content = page.content.decode()
    assert f"<h1>{HEADINGS[language]}</h1>" in content
    assert f'<html lang="{language}">' in content
    assert 'class="bar"' in content and "chat.css" in content  # styled as the other pages
    assert 'href="http://testserver/spaces/" data-back' in content
    assert 'href="/" data-home' in content
    assert message in content
    if language != "en":  # nothing left in English but the name
        assert DATABASE_AWAY not in content and "Try again" not in content
        assert "Back to your conversations" not in content


def test_a_lost_change_is_named_in_the_persons_language():
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.utils import translation

    from core.errors import DatabaseUnavailableMiddleware, WriteNotSaved

    middleware = DatabaseUnavailableMiddleware(lambda request: HttpResponse())
    request = RequestFactory().post("/spaces/1/documents/2/withdraw/", {"reason": "old"})
    with translation.override("de"):
        action = translation.gettext("the withdrawal of “%(title)s”") % {"title": "Policy"}
        page = middleware.process_exception(request, WriteNotSaved(action))
    content = page.content.decode()
    assert "Nicht gespeichert: das Zurückziehen von „Policy“." in content
    assert "was not saved" not in content
    assert 'name="reason" value="old"' in content
