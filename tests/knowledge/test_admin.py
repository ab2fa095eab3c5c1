"""Django admin is scoped by roles, not by staff status (issue 10, items 9 and 10)."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from core.models import ApiKey
from core.services import api_key_create
from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.models import Extraction
from knowledge.services import space_create, space_member_set
from tests.core.test_api_keys import assert_error
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

OURS = "Our reviews happen every quarter and cover open risks."
THEIRS = "The other team's secret roadmap names the launch date."
PRIVATE = "My private note: salary negotiation starts on Monday."


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ingest(user, text: str, filename: str, **fields):
    result = document_upload(user=user, filename=filename, data=text.encode(), **fields)
    revision_extract(revision_id=result.revision.pk)
    return result


@pytest.fixture
def curator(space):
    user = make_user("curator", staff=True)  # staff opens admin; the role decides what it shows
    space_member_set(space=space, username="curator", role="curator")
    return user


@pytest.fixture
def corpus(space, owner, outsider, staff):
    other = space_create(name="Other", created_by=make_user("other-lead", staff=True))
    return {
        "ours": ingest(owner, OURS, "ours.txt", space=space),
        "theirs": ingest(other.created_by, THEIRS, "theirs.txt", space=other),
        "private": ingest(outsider, PRIVATE, "mine.txt", private=True),
    }


def test_a_curator_sees_in_admin_only_their_spaces_documents_revisions_and_extractions(
    corpus, curator
):
    client = admin_client(curator)
    for model in ("document", "documentrevision", "extraction"):
        page = client.get(f"/admin/knowledge/{model}/")
        assert page.status_code == 200, model
        html = page.content.decode()
        assert "ours" in html, model
        assert "theirs" not in html and "mine" not in html, model
    revisions = client.get("/admin/knowledge/documentrevision/").content.decode()
    assert "primary: admitted 100%" in revisions  # extraction progress in the list

    ours = Extraction.objects.filter(revision=corpus["ours"].revision).first()
    assert OURS in client.get(f"/admin/knowledge/extraction/{ours.pk}/change/").content.decode()
    for key in ("theirs", "private"):
        extraction = Extraction.objects.filter(revision=corpus[key].revision).first()
        page = client.get(f"/admin/knowledge/extraction/{extraction.pk}/change/")
        assert page.status_code in {302, 403, 404}
        assert THEIRS not in page.content.decode() and PRIVATE not in page.content.decode()
        revision = client.get(
            f"/admin/knowledge/documentrevision/{corpus[key].revision.pk}/change/"
        )
        assert revision.status_code in {302, 403, 404}


def test_staff_with_every_view_permission_still_see_no_other_space_or_private_file(corpus):
    snoop = make_user("snoop", staff=True)
    snoop.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client = admin_client(snoop)
    for model in ("document", "documentrevision", "extraction"):
        page = client.get(f"/admin/knowledge/{model}/")
        assert page.status_code in {302, 403}, model
    for extraction in Extraction.objects.all():
        page = client.get(f"/admin/knowledge/extraction/{extraction.pk}/change/")
        assert page.status_code in {302, 403, 404}
        assert PRIVATE not in page.content.decode() and OURS not in page.content.decode()
    for url in ("/admin/audit/outputrelease/", "/admin/datasets/governedquery/"):
        assert client.get(url).status_code in {302, 403}


def test_staff_without_a_role_cannot_read_the_space_over_the_api(corpus, space):
    snoop = make_user("snoop", staff=True)
    client = client_for(snoop)
    document = corpus["ours"].document
    assert client.get("/v1/documents").json()["results"] == []
    assert_error(client.get(f"/v1/documents/{document.pk}"), 404, "not_found")
    assert_error(client.get(f"/v1/documents/{document.pk}/text"), 404, "not_found")
    assert_error(client.get(f"/v1/spaces/{space.pk}"), 404, "not_found")
    body = client.post(
        "/v1/answer", {"query": "How often do our reviews happen?"}, format="json"
    ).json()
    assert body["evidence"]["answer_status"] != "evidence_backed"
    assert OURS not in body["answer"]["text"]


def test_a_superuser_sees_every_space_in_admin_but_no_private_file(corpus):
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    html = admin_client(root).get("/admin/knowledge/document/").content.decode()
    assert "ours" in html and "theirs" in html and "mine" not in html


def test_revocation_in_admin_is_one_way(owner):
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    issued = api_key_create(user=owner, name="laptop")
    client = admin_client(root)
    client.post(
        "/admin/core/apikey/",
        {"action": "revoke_selected", "_selected_action": [issued.api_key.pk]},
    )
    revoked_at = ApiKey.objects.get(pk=issued.api_key.pk).revoked_at
    assert revoked_at is not None

    page = client.get(f"/admin/core/apikey/{issued.api_key.pk}/change/").content.decode()
    assert 'name="revoked_at' not in page
    client.post(
        f"/admin/core/apikey/{issued.api_key.pk}/change/",
        {"name": "laptop", "revoked_at_0": "", "revoked_at_1": "", "_save": "Save"},
    )
    assert ApiKey.objects.get(pk=issued.api_key.pk).revoked_at == revoked_at
    assert client_for(owner).get("/v1/spaces").status_code == 200  # a fresh key still works
    response = Client().get("/v1/spaces", HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert response.status_code == 401


def test_staff_with_key_permissions_see_only_their_own_keys(owner):
    clerk = make_user("clerk", staff=True)
    clerk.user_permissions.set(Permission.objects.filter(codename__endswith="_apikey"))
    mine = api_key_create(user=clerk, name="clerk-key").api_key
    theirs = api_key_create(user=owner, name="owner-key").api_key
    client = admin_client(clerk)
    html = client.get("/admin/core/apikey/").content.decode()
    assert "clerk-key" in html and "owner-key" not in html
    assert client.get(f"/admin/core/apikey/{theirs.pk}/change/").status_code in {302, 404}
    client.post(
        "/admin/core/apikey/", {"action": "revoke_selected", "_selected_action": [theirs.pk]}
    )
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None
    assert ApiKey.objects.get(pk=mine.pk).revoked_at is None
