from collections.abc import Iterator

import pytest
from django.conf import settings

from audit.signed_note import NoteSigner
from core.embedded import EmbeddedPostgres, EmbeddedRedis
from datasets.services import dataset_upload
from knowledge.models import Space
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import ACCOUNTING, INVOICES, OPERATIONS, ingest
from tests.audit.helpers import ORIGIN
from tests.helpers import make_user
from tests.services import celery_worker_process, daphne_process


@pytest.fixture(scope="session")
def embedded_services() -> Iterator[None]:
    """The suite's own PostgreSQL and Redis under var/test (unless URLs are configured)."""
    started = []
    if settings.EMBEDDED_POSTGRES:
        postgres = EmbeddedPostgres(settings.EMBEDDED_PG_DIR)
        if postgres.start():
            started.append(postgres)
    if settings.EMBEDDED_REDIS:
        redis = EmbeddedRedis(settings.EMBEDDED_REDIS_DIR)
        if redis.start():
            started.append(redis)
    yield
    from django.db import connections

    connections.close_all()
    for service in reversed(started):
        service.stop()


@pytest.fixture(scope="session")
def django_db_setup(embedded_services, django_db_setup, django_db_blocker):
    """pytest-django's test database, created once the embedded services run."""
    yield
    # The keyword channel's thread has a connection of its own: closed before the drop.
    from knowledge.retrieval import CHANNEL_THREAD

    CHANNEL_THREAD.close_connection()
    with django_db_blocker.unblock():
        _other_sessions_wait()


def _other_sessions_wait(timeout: float = 30) -> None:
    """Until the backends of the suite's stopped processes (worker, Daphne) have noticed
    their clients are gone: DROP DATABASE refuses while any session remains. A guard
    against a hang, not a bound: after `timeout` the drop is tried all the same."""
    import time

    from django.db import connection

    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if not cursor.fetchone()[0]:
                return
            time.sleep(0.1)


@pytest.fixture(scope="session")
def test_database_name(django_db_setup, django_db_blocker) -> str:
    from django.db import connection

    return connection.settings_dict["NAME"]


@pytest.fixture(scope="session")
def logs_dir() -> "Path":  # noqa: F821
    path = settings.DATA_DIR / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def celery_worker(test_database_name, logs_dir):
    """A real Celery worker process on the test database and the test Redis.

    Tests that use it need `transactional_db`: the worker sees committed rows only.
    """
    with celery_worker_process(test_database_name, logs_dir / "celery-worker.log") as worker:
        yield worker


@pytest.fixture(scope="session")
def live_server_url(test_database_name, logs_dir) -> Iterator[str]:
    """A real Daphne server on a free port, on the test database."""
    with daphne_process(test_database_name, logs_dir / "daphne.log") as url:
        yield url


# --- people and spaces: an owner (curator), a member (reader) and an outsider -----


@pytest.fixture
def staff(db):
    return make_user("staff", staff=True)


@pytest.fixture
def owner(db):
    return make_user("owner")


@pytest.fixture
def member(db):
    return make_user("member")


@pytest.fixture
def outsider(db):
    return make_user("outsider")


@pytest.fixture
def space(staff, owner, member) -> Space:
    space = space_create(name="Operations", created_by=staff)
    space_member_set(space=space, username=owner.username, role="curator")
    space_member_set(space=space, username=member.username, role="reader")
    return space


@pytest.fixture
def library(space, owner):
    """The mixed-sources corpus: two documents and the invoices dataset."""
    operations = ingest(owner, space, "operations.md", OPERATIONS)
    accounting = ingest(owner, space, "accounting-policy.md", ACCOUNTING)
    snapshot = dataset_upload(
        user=owner, space=space, filename="invoices.csv", data=INVOICES, table="orders"
    )
    return {"operations": operations, "accounting": accounting, "snapshot": snapshot}


@pytest.fixture
def log_key(tmp_path, settings) -> NoteSigner:
    """The answer log's signing key, installed as KOINON_LOG_KEY_FILE for this test."""
    signer = NoteSigner.generate(ORIGIN)
    path = tmp_path / "log.key"
    path.write_text(signer.key_string() + "\n")
    settings.KOINON_LOG_KEY_FILE = str(path)
    return signer


@pytest.fixture(autouse=True)
def _allow_flushing_releases(request):
    """Transactional tests end with a TRUNCATE of every table, which the record triggers
    refuse while receipts, stream events or tool calls exist. As the database owner
    would (docs/releases.md), remove this test's records with triggers bypassed, first."""
    marker = request.node.get_closest_marker("django_db")
    if not (marker and marker.kwargs.get("transaction")):
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    from django.db import connection

    from core.embedded import RECORD_TABLES

    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for table in RECORD_TABLES:
            cursor.execute(f"DELETE FROM {table}")  # noqa: S608
        cursor.execute("SET session_replication_role = DEFAULT")


@pytest.fixture
def runtime_role(db):
    """A role with the runtime role's grants and revokes (core.embedded.RUNTIME_GRANTS, what
    ensure_runtime_role and deploy/postgres/grant-runtime-role.sql give koinon_app), for a
    test to take on its connection with SET ROLE. Dropped afterwards."""
    from django.db import connection
    from psycopg import sql

    from core.embedded import RUNTIME_GRANTS

    role = f"koinon_runtime_{connection.settings_dict['NAME']}"[:60]
    names = {
        "database": sql.Identifier(connection.settings_dict["NAME"]),
        "role": sql.Identifier(role),
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL("CREATE ROLE {role} NOLOGIN").format(**names).as_string())
        for statement in RUNTIME_GRANTS:
            cursor.execute(sql.SQL(statement).format(**names).as_string())
    yield role
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")
        cursor.execute(sql.SQL("DROP OWNED BY {role}").format(**names).as_string())
        cursor.execute(sql.SQL("DROP ROLE {role}").format(**names).as_string())


@pytest.fixture
def fake():
    """A fake OpenAI-compatible server on loopback (tests/answers/fake_llm.py)."""
    from tests.answers.fake_llm import FakeModelServer

    server = FakeModelServer().start()
    yield server
    server.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that drive the real browser are marked `browser` (make test-fast leaves them,
    and the `slow` ones, out; make test and CI run everything)."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
