import hashlib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from core.models import ApiKey
from core.services import api_key_create, api_key_revoke
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert "Traceback" not in response.content.decode()
    return body["error"]


def test_it_accepts_a_valid_key(owner, space):
    response = client_for(owner).get("/v1/spaces")
    assert response.status_code == 200
    assert [row["name"] for row in response.json()["results"]] == ["Operations"]


def test_it_rejects_a_missing_key():
    response = APIClient().get("/v1/spaces")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    ["Token abc", "Bearer", "Bearer two parts", "Basic dXNlcjpwYXNz", "Bearer kn_\xe9"],
)
def test_it_rejects_a_malformed_header(owner, header):
    response = APIClient().get("/v1/spaces", HTTP_AUTHORIZATION=header)
    assert_error(response, 401, "malformed_credentials")


def test_it_rejects_an_unknown_key(owner):
    response = APIClient().get("/v1/spaces", HTTP_AUTHORIZATION="Bearer kn_" + "x" * 43)
    assert_error(response, 401, "invalid_credentials")


def test_it_rejects_a_revoked_key(owner):
    issued = api_key_create(user=owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/v1/spaces").status_code == 200
    api_key_revoke(prefix=issued.api_key.prefix)
    assert_error(client.get("/v1/spaces"), 401, "invalid_credentials")


def test_it_rejects_the_key_of_a_deactivated_user(owner):
    client = client_for(owner)
    owner.is_active = False
    owner.save()
    assert_error(client.get("/v1/spaces"), 401, "invalid_credentials")


def test_it_stores_only_the_hash_and_a_short_prefix(owner):
    issued = api_key_create(user=owner, name="laptop")
    row = ApiKey.objects.values().get(pk=issued.api_key.pk)
    assert row["key_sha256"] == hashlib.sha256(issued.secret.encode()).hexdigest()
    assert issued.secret.startswith(row["prefix"])
    assert len(row["prefix"]) < len(issued.secret) // 3
    assert not any(issued.secret in str(value) for value in row.values())


def test_a_user_may_hold_several_keys_and_each_works(owner, space):
    first, second = api_key_create(user=owner), api_key_create(user=owner)
    assert first.secret != second.secret
    api_key_revoke(prefix=first.api_key.prefix)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second.secret}")
    assert client.get("/v1/spaces").status_code == 200


def test_it_records_when_a_key_was_last_used(owner):
    issued = api_key_create(user=owner)
    assert issued.api_key.last_used_at is None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    client.get("/v1/spaces")
    issued.api_key.refresh_from_db()
    assert issued.api_key.last_used_at is not None


def test_apikey_create_prints_the_key_alone_on_its_last_line(owner):
    out = StringIO()
    call_command("apikey", "create", "--user", "owner", "--name", "ci", stdout=out)
    secret = out.getvalue().strip().splitlines()[-1]
    assert secret.startswith("kn_") and " " not in secret
    api_key = ApiKey.objects.get(user=owner)
    assert api_key.name == "ci"
    assert api_key.key_sha256 == hashlib.sha256(secret.encode()).hexdigest()


def test_apikey_revoke_and_list(owner):
    issued = api_key_create(user=owner, name="old")
    out = StringIO()
    call_command("apikey", "revoke", issued.api_key.prefix, stdout=out)
    assert "revoked" in out.getvalue()
    out = StringIO()
    call_command("apikey", "list", "--user", "owner", stdout=out)
    line = out.getvalue().strip()
    assert issued.api_key.prefix in line and "revoked" in line
    assert issued.secret not in line


def test_apikey_commands_reject_unknown_users_and_prefixes(db):
    with pytest.raises(CommandError, match="no user"):
        call_command("apikey", "create", "--user", "nobody")
    with pytest.raises(CommandError, match="no API key"):
        call_command("apikey", "revoke", "kn_missing")
