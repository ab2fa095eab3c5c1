"""Bad input gets a typed 4xx, never a 500 (SPEC §11; issue 10, item 5)."""

import base64

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver

from core.inputs import object_id_parse
from datasets.services import dataset_upload
from knowledge.curation import proposal_create
from tests.answers.helpers import ask
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

BAD_IDS = ["%C2%B2", "9" * 5000, "%00"]  # "²" is a digit to str.isdigit(), not to int()


def _routes(resolver: URLResolver, prefix: str = "") -> list[tuple[str, list[str]]]:
    routes = []
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes.extend(_routes(pattern, route))
        elif isinstance(pattern, URLPattern) and pattern.pattern.converters:
            routes.append((route, list(pattern.pattern.converters)))
    return routes


def id_routes() -> list[tuple[str, list[str]]]:
    return [(route, names) for route, names in _routes(get_resolver()) if route.startswith("v1/")]


def test_the_urlconf_has_the_id_routes_this_test_walks():
    routes = {route for route, _ in id_routes()}
    assert {
        "v1/datasets/<str:dataset_id>/schema",
        "v1/knowledge/proposals/<str:proposal_id>",
        "v1/runs/<str:run_id>/audit",
        "v1/spaces/<str:space_id>/members",
    } <= routes


@pytest.mark.parametrize("bad", BAD_IDS)
def test_every_id_route_answers_bad_ids_without_a_server_error(space, owner, bad):
    client = client_for(owner)
    for route, names in id_routes():
        path = "/" + route
        for name in names:
            path = path.replace(f"<str:{name}>", bad).replace(f"<{name}>", bad)
        for method in ("get", "post", "delete"):
            response = getattr(client, method)(path, {}, format="json")
            assert response.status_code < 500, (method, path[:80], response.content[:300])
            if method == "get" and response.status_code != 405:
                assert response.status_code == 404, (path[:80], response.content[:300])


@pytest.mark.parametrize("value", ["²", "٣", "9" * 19, "9" * 5000, "\x00", "", "0", "-1", " 1"])
def test_the_id_parser_takes_ascii_digits_of_bounded_length_only(value):
    assert object_id_parse(value) is None


def test_the_id_parser_takes_a_plain_id():
    assert (object_id_parse("42"), object_id_parse(42), object_id_parse("9" * 18)) == (
        42,
        42,
        10**18 - 1,
    )


@pytest.fixture
def dataset(space, owner):
    data = b"invoice,amount\nA-1,1250\n"
    return dataset_upload(
        user=owner, space=space, filename="i.csv", data=data, table="orders"
    ).dataset


@pytest.mark.parametrize("snapshot", ["²", "9" * 5000, "\x00", "0"])
def test_a_bad_snapshot_number_is_404(dataset, member, snapshot):
    response = client_for(member).get(f"/v1/datasets/{dataset.pk}/schema", {"snapshot": snapshot})
    assert_error(response, 404, "snapshot_not_found")


def test_a_body_over_2_mib_is_413(member):
    body = '{"query": "' + "a" * (3 * 1024 * 1024) + '"}'
    response = client_for(member).generic(
        "POST", "/v1/answer", body, content_type="application/json"
    )
    assert_error(response, 413, "too_large")


def test_a_form_body_over_2_mib_is_413(member):
    body = "query=" + "a" * (3 * 1024 * 1024)
    response = client_for(member).generic(
        "POST", "/v1/knowledge/proposals", body, content_type="application/x-www-form-urlencoded"
    )
    assert_error(response, 413, "too_large")


def test_deeply_nested_json_is_400(member):
    body = '{"query": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = client_for(member).generic(
        "POST", "/v1/answer", body, content_type="application/json"
    )
    assert_error(response, 400, "parse_error")


@pytest.mark.parametrize("escaped", ["\\ud800", "\\u0000", "a\\udfffb"])
def test_a_nul_or_lone_surrogate_in_the_question_is_422(member, escaped):
    body = '{"query": "Who owns ' + escaped + ' reviews?"}'
    response = client_for(member).generic(
        "POST", "/v1/answer", body, content_type="application/json"
    )
    error = assert_error(response, 422, "invalid")
    assert "query" in error["fields"]


@pytest.mark.parametrize(
    "cursor",
    [
        "junk",
        "é",
        base64.b64encode(b"p=abc").decode(),
        base64.b64encode(b"p=" + b"9" * 5000).decode(),
        base64.b64encode(b"p=%00").decode(),
    ],
)
def test_a_junk_pagination_cursor_is_404(space, owner, cursor):
    proposal_create(user=owner, space=space, body="Reviews are monthly.", title="Reviews")
    for path in ("/v1/spaces", "/v1/documents", "/v1/datasets", "/v1/knowledge/proposals"):
        response = client_for(owner).get(path, {"cursor": cursor})
        assert_error(response, 404, "not_found")


def test_huge_ids_in_bodies_are_422(space, owner):
    client = client_for(owner)
    huge = 10**30
    for path, body in [
        ("/v1/knowledge/proposals", {"space": huge, "body": "x"}),
        ("/v1/knowledge/proposals", {"space": space.pk, "body": "x", "entry": huge}),
        ("/v1/answer", {"query": "Who owns reviews?", "space_ids": [huge]}),
        ("/v1/answer", {"query": "Who owns reviews?", "conversation_id": huge}),
    ]:
        response = client.post(path, body, format="json")
        assert response.status_code == 422, (path, body, response.content)
    response = client.get("/v1/search", {"q": "reviews", "space": str(huge)})
    assert response.status_code == 422, response.content


def test_a_nul_in_a_member_name_is_not_a_server_error(space, owner):
    response = client_for(owner).delete(f"/v1/spaces/{space.pk}/members/a%00b")
    assert_error(response, 404, "member_not_found")
    response = client_for(owner).post(
        f"/v1/spaces/{space.pk}/members", {"username": "a\x00b", "role": "reader"}, format="json"
    )
    assert response.status_code == 422


def test_a_nul_byte_in_a_csv_cell_is_refused_at_upload(space, owner):
    upload = SimpleUploadedFile("nul.csv", b"invoice,amount\nA\x00-1,1250\n")
    response = client_for(owner).post(
        "/v1/datasets",
        {"file": upload, "space": space.pk, "table": "orders"},
        format="multipart",
    )
    error = assert_error(response, 422, "malformed_csv")
    assert "NUL" in error["message"]


@pytest.mark.parametrize("page_size", ["null", "0", "-1", "1.5", "", "²", " 2"])
def test_a_page_size_that_is_not_a_positive_integer_is_422(space, owner, page_size):
    response = client_for(owner).get("/v1/spaces", {"page_size": page_size})
    assert_error(response, 422, "invalid")
    assert "page_size" in response.json()["error"]["fields"]


def test_a_page_size_over_the_maximum_is_served_as_the_maximum(space, owner):
    for page_size in ("201", "9" * 5000):
        response = client_for(owner).get("/v1/spaces", {"page_size": page_size})
        assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/conversations", {"title": 0}, "title"),
        ("/v1/conversations", {"title": "T", "colour": "red"}, "colour"),
        ("/v1/knowledge/proposals", {"space": "1", "body": "x", "title": "T"}, "space"),
        ("/v1/knowledge/proposals", {"space": 1, "body": "x", "title": "T", "x": 1}, "x"),
        ("/v1/memory", {"kind": "correction", "text": 5}, "text"),
    ],
)
def test_a_json_body_value_of_the_wrong_type_or_an_unknown_key_is_422(
    space, owner, path, body, field
):
    response = client_for(owner).post(path, body, format="json")
    assert_error(response, 422, "invalid")
    assert field in response.json()["error"]["fields"]


def test_project_memory_takes_a_json_boolean_and_no_other_key(space, owner):
    path = f"/v1/spaces/{space.pk}/project-memory"
    for body in ({"enabled": "true"}, {"enabled": 1}, {"enabled": True, "note": "x"}):
        response = client_for(owner).put(path, body, format="json")
        assert_error(response, 422, "invalid")


def test_a_form_body_still_reads_its_values_from_text(space, owner):
    upload = SimpleUploadedFile("orders.csv", b"invoice,amount\nA-1,5\n", "text/csv")
    response = client_for(owner).post(
        "/v1/datasets", {"file": upload, "space": str(space.pk), "table": "orders"}
    )
    assert response.status_code == 201, response.content


def test_a_stream_version_other_than_1_is_422(space, owner):
    run_id = ask(owner, "Who owns service reviews?")["run_id"]
    response = client_for(owner).get(f"/v1/runs/{run_id}/events", {"stream_version": "2"})
    assert_error(response, 422, "invalid")
