"""The OpenAPI schema describes every endpoint, and the live server keeps to it (issue 10,
item 12): schemathesis drives the real Daphne of the test suite from the live schema."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from answers.models import AnswerRun
from conversations.services import intent_preview
from datasets.services import dataset_upload
from knowledge.curation import proposal_create
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.models import Space
from memory.services import correction_create
from tests.answers.helpers import ask
from tests.helpers import client_for
from tests.services import ROOT

SCHEMA_ACCEPT = "application/vnd.oai.openapi+json"
LISTS = [
    "/v1/spaces",
    "/v1/documents",
    "/v1/datasets",
    "/v1/knowledge/proposals",
    "/v1/conversations",
    "/v1/memory",
    "/v1/conversations/{conversation_id}/shares",
]


def schema(user) -> dict:
    response = client_for(user).get("/v1/schema/", HTTP_ACCEPT=SCHEMA_ACCEPT)
    assert response.status_code == 200
    return response.json()


def resolve(document: dict, node: dict) -> dict:
    while "$ref" in node:
        node = document["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


@pytest.mark.django_db
def test_every_operation_has_a_typed_success_body_and_the_error_responses(member):
    document = schema(member)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            success = [status for status in responses if status.startswith("2")]
            assert success, (method, path)
            for status in success:
                if status == "204":
                    continue
                content = responses[status]["content"]
                if "application/json" not in content:  # the event streams
                    assert "text/event-stream" in content, (method, path)
                    continue
                body = content["application/json"]["schema"]
                assert resolve(document, body).get("type") == "object", (method, path, status)
            for status in ("400", "401", "403", "404", "413", "422"):
                error = responses[status]["content"]["application/json"]["schema"]
                assert resolve(document, error)["required"] == ["error"], (method, path, status)
    assert document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert len(
        {op["operationId"] for ops in document["paths"].values() for op in ops.values()}
    ) == sum(len(ops) for ops in document["paths"].values())


@pytest.mark.django_db
def test_list_endpoints_are_documented_as_pages_not_bare_arrays(member):
    document = schema(member)
    for path in LISTS:
        body = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        page = resolve(document, body["schema"])
        assert set(page["properties"]) == {"results", "next", "previous"}, path
        assert page["properties"]["results"]["type"] == "array", path
        names = {p["name"] for p in document["paths"][path]["get"]["parameters"]}
        assert {"cursor", "page_size"} <= names, path


@pytest.mark.django_db
def test_the_answer_endpoint_is_typed_both_ways(member):
    document = schema(member)
    operation = document["paths"]["/v1/answer"]["post"]
    request = resolve(document, operation["requestBody"]["content"]["application/json"]["schema"])
    assert request["required"] == ["query"]
    assert {"mode", "evidence_policy", "space_ids", "language"} <= set(request["properties"])
    response = resolve(
        document, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert {"run_id", "answer", "evidence", "quality", "release"} <= set(response["required"])
    evidence = resolve(document, response["properties"]["evidence"])
    assert "answer_status" in evidence["required"]


@pytest.mark.django_db
def test_every_request_body_refuses_keys_it_does_not_name(member):
    """The one rule for bodies (issue 48, item 11): the schema says `additionalProperties:
    false` and the serializer (a StrictSerializer) refuses them; each body has its own
    component, so no two inputs share one name."""
    document = schema(member)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                name = media["schema"]["$ref"].rsplit("/", 1)[1]
                body = resolve(document, media["schema"])
                assert body.get("additionalProperties") is False, (method, path, name)
    assert "Input" not in document["components"]["schemas"]


def schemathesis_command(url: str, key: str) -> list[str]:
    executable = Path(sys.executable).parent / "schemathesis"
    return [
        str(executable),
        # Per-operation statuses for refusals JSON Schema cannot state, each with its reason.
        "--config-file",
        str(Path(__file__).parent / "schemathesis.toml"),
        "run",
        f"{url}/v1/schema/",
        "--url",
        url,
        "--header",
        f"Authorization: {key}",
        # Every check: no 5xx, responses as documented, schema-valid requests accepted and
        # schema-violating ones refused (issue 48, item 11), auth, methods, deleted objects.
        "--checks",
        "all",
        # Bounded so the run takes a minute or two on two cores; the seed makes it repeatable.
        "--max-examples",
        "40",
        "--seed",
        "20261201",
        "--workers",
        "1",
        "--phases",
        "examples,coverage,fuzzing",
        "--generation-database",
        "none",
        "--request-timeout",
        "60",
        "--exclude-path",
        "/v1/health",
        "--suppress-health-check",
        "all",
        "--no-color",
    ]


@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_error_and_no_conformance_failure(
    live_server_url, space: Space, owner, member
):
    result = document_upload(
        user=owner,
        filename="ops.md",
        space=space,
        data=b"# Operations\n\nThe platform team owns service reviews every quarter.\n",
    )
    revision_extract(revision_id=result.revision.pk)
    snapshot = dataset_upload(
        user=owner,
        space=space,
        filename="orders.csv",
        table="orders",
        data=b"invoice,amount,customer\nA-1,1250,acme\nA-3,99,zeta\n",
    )
    proposal = proposal_create(user=owner, space=space, body="Reviews are quarterly.", title="R")
    run_id = ask(owner, "Who owns service reviews?")["run_id"]
    conversation = AnswerRun.objects.get(pk=run_id).conversation
    entry = correction_create(
        user=owner, text="Service reviews are in the handbook", scope="personal"
    )
    intent = intent_preview(
        user=owner, conversation=conversation, run_id=run_id, space_id=space.pk, title="Reviews"
    )
    ids = {
        "space_id": space.pk,
        "document_id": result.document.pk,
        "proposal_id": proposal.pk,
        "dataset_id": snapshot.dataset_id,
        "run_id": run_id,
        "username": member.username,
        "conversation_id": conversation.pk,
        "entry_id": entry.pk,
        "intent_id": intent.pk,
    }
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "KOINON_SCHEMATHESIS_IDS": json.dumps(ids),
    }
    key = client_for(owner)._credentials["HTTP_AUTHORIZATION"]
    workdir = settings.DATA_DIR / "schemathesis"  # its crash cache stays out of the checkout
    workdir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        schemathesis_command(live_server_url, key),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
        cwd=workdir,
    )
    assert run.returncode == 0, run.stdout[-12000:] + run.stderr[-3000:]
