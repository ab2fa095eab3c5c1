"""One role check for every way into a space's documents: API, CLI, admin, library pages.

Upload, new revision, withdraw, restore and erase: the space's curator and a superuser may; a
reader of the space is refused with 403 (they see it); a curator of another space and an
outsider get 404 (they do not). Nothing changes when refused.
"""

import json
import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from knowledge.documents.upload import document_upload
from knowledge.lifecycle import document_withdraw
from knowledge.models import Document, DocumentRevision, Erasure
from knowledge.services import space_create, space_member_set
from tests.helpers import client_for, make_user

pytestmark = pytest.mark.django_db

ROLES = ["curator", "reader", "other_curator", "outsider", "superuser"]
REFUSAL = {"reader": 403, "other_curator": 404, "outsider": 404}


@pytest.fixture
def people(space, owner, member, outsider, staff) -> dict:
    other = make_user("elsewhere")
    elsewhere = space_create(name="Elsewhere", created_by=staff)
    space_member_set(space=elsewhere, username=other.username, role="curator")
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    return {
        "curator": owner,
        "reader": member,
        "other_curator": other,
        "outsider": outsider,
        "superuser": root,
    }


@pytest.fixture
def document(space, owner) -> Document:
    return document_upload(
        user=owner, filename="policy.txt", data=b"Invoices are kept for ten years.", space=space
    ).document


def allowed(role: str) -> bool:
    return role not in REFUSAL


def revisions(document: Document) -> int:
    return DocumentRevision.objects.filter(document=document).count()


def erased(document: Document) -> bool:
    return Erasure.objects.filter(document=document).exists()


def withdrawn(document: Document) -> bool:
    document.refresh_from_db()
    return document.is_withdrawn


# --- API ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_api_upload(people, space, role):
    response = client_for(people[role]).post(
        "/v1/documents",
        {"file": SimpleUploadedFile("new.txt", b"A new text."), "space": space.pk},
        format="multipart",
    )
    assert response.status_code == (202 if allowed(role) else REFUSAL[role]), response.json()
    assert Document.objects.filter(title="new").exists() == allowed(role)


@pytest.mark.parametrize("role", ROLES)
def test_api_new_revision(people, space, document, role):
    response = client_for(people[role]).post(
        "/v1/documents",
        {
            "file": SimpleUploadedFile("policy.txt", b"Invoices are kept for twelve years."),
            "space": space.pk,
            "document": document.pk,
        },
        format="multipart",
    )
    assert response.status_code == (202 if allowed(role) else REFUSAL[role]), response.json()
    assert revisions(document) == (2 if allowed(role) else 1)


@pytest.mark.parametrize("role", ROLES)
def test_api_withdraw_and_restore(people, owner, document, role):
    client = client_for(people[role])
    response = client.post(f"/v1/documents/{document.pk}/withdraw", {"reason": "outdated"})
    assert response.status_code == (200 if allowed(role) else REFUSAL[role]), response.json()
    assert withdrawn(document) == allowed(role)
    if allowed(role):
        assert response.json()["withdrawn"] is True
        assert response.json()["withdrawn_at"]
    else:
        document_withdraw(user=owner, document=document)
    response = client.post(f"/v1/documents/{document.pk}/restore")
    assert response.status_code == (200 if allowed(role) else REFUSAL[role]), response.json()
    assert withdrawn(document) == (not allowed(role))


@pytest.mark.parametrize("role", ROLES)
def test_api_erase(people, document, role):
    revision = document.revisions.get()
    response = client_for(people[role]).post(
        f"/v1/documents/{document.pk}/revisions/{revision.pk}/erase", {"reason": "leaked"}
    )
    assert response.status_code == (200 if allowed(role) else REFUSAL[role]), response.json()
    assert erased(document) == allowed(role)
    if allowed(role):
        body = response.json()
        assert (body["revision"], body["reason"]) == (revision.pk, "leaked")
        assert body["erased_by"] == people[role].username
        detail = client_for(people[role]).get(f"/v1/documents/{document.pk}").json()
        assert detail["revisions"][0]["erased_at"] == body["erased_at"]


def test_api_refusals_are_typed(people, space, document):
    reader = client_for(people["reader"])
    body = reader.post(f"/v1/documents/{document.pk}/withdraw").json()
    assert body["error"]["code"] == "permission_denied"
    assert "curators" in body["error"]["message"]
    outsider = client_for(people["outsider"])
    body = outsider.post(f"/v1/documents/{document.pk}/withdraw").json()
    assert body["error"]["code"] == "not_found"
    curator = client_for(people["curator"])
    too_long = curator.post(f"/v1/documents/{document.pk}/withdraw", {"reason": "x" * 501})
    assert too_long.status_code == 422
    assert too_long.json()["error"]["fields"]["reason"]
    assert not withdrawn(document)
    for path in ("abc", "0", "99999999999999999999", "%00"):
        assert curator.post(f"/v1/documents/{path}/withdraw").status_code == 404
        assert curator.post(f"/v1/documents/{path}/restore").status_code == 404


@pytest.mark.parametrize(
    "reason", [5, 1.5, True, ["leaked"], {"why": "leaked"}, "a\x00b", "a\ud800b"]
)
def test_api_reasons_must_be_storable_text(people, document, reason):
    """Issue 48 (4, 8): an erasure cannot be undone, so its reason is text, never a number
    turned into one; NUL or a lone surrogate is a typed 422 too, and nothing happens."""
    curator = client_for(people["curator"])
    revision = document.revisions.get()
    for url in (
        f"/v1/documents/{document.pk}/revisions/{revision.pk}/erase",
        f"/v1/documents/{document.pk}/withdraw",
    ):
        # As sent on the wire: a lone surrogate can only arrive as a JSON escape.
        raw = json.dumps({"reason": reason})
        response = curator.post(url, raw, content_type="application/json")
        assert response.status_code == 422, (url, response.content)
        error = response.json()["error"]
        assert error["fields"]["reason"], url
    assert not erased(document) and not withdrawn(document)


@pytest.mark.parametrize("reason", ["a\x00b", "\x00"])
def test_library_forms_refuse_reasons_postgresql_cannot_store(people, space, document, reason):
    """Issue 48 (4): the library's withdraw and erase forms gave a 500 for a NUL; now the
    same check as the API's, a 422 page naming the field, and nothing changed."""
    client = page_client(people["curator"])
    base = f"/spaces/{space.pk}/documents/{document.pk}"
    revision = document.revisions.get()
    withdraw = client.post(f"{base}/withdraw/", {"reason": reason})
    erase = client.post(f"{base}/erase/", {"revision": revision.pk, "reason": reason})
    for response in (withdraw, erase):
        assert response.status_code == 422
        assert "reason cannot be used" in response.text or "Say why" in response.text
    assert not erased(document) and not withdrawn(document)
    admin = Client()
    admin.force_login(people["superuser"])
    page = admin.post(f"/admin/knowledge/documentrevision/{revision.pk}/erase/", {"reason": reason})
    assert page.status_code == 200 and b"Say why the text is erased" in page.content
    assert not erased(document)


# --- CLI ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_cli_ingest(people, space, tmp_path, role):
    path = tmp_path / "cli.txt"
    path.write_bytes(b"Written from the command line.")
    out, err = StringIO(), StringIO()
    if allowed(role):
        call_command(
            "ingest",
            str(path),
            space=space.name,
            user=people[role].username,
            stdout=out,
            stderr=err,
        )
        assert "cli.txt: document" in out.getvalue()
    else:
        with pytest.raises(CommandError, match="may not add to 'Operations'"):
            call_command(
                "ingest",
                str(path),
                space=space.name,
                user=people[role].username,
                stdout=out,
                stderr=err,
            )
    assert Document.objects.filter(title="cli").exists() == allowed(role)


@pytest.mark.parametrize("role", ROLES)
def test_cli_new_revision(people, space, document, tmp_path, role):
    path = tmp_path / "policy.txt"
    path.write_bytes(b"Invoices are kept for twelve years.")
    options = {
        "space": space.name,
        "user": people[role].username,
        "document": document.pk,
        "stdout": StringIO(),
        "stderr": StringIO(),
    }
    if allowed(role):
        call_command("ingest", str(path), **options)
    else:
        with pytest.raises(CommandError, match="may not add"):
            call_command("ingest", str(path), **options)
    assert revisions(document) == (2 if allowed(role) else 1)


@pytest.mark.parametrize("role", ROLES)
def test_cli_withdraw_and_restore(people, document, role):
    name = people[role].username
    if allowed(role):
        call_command(
            "document",
            "withdraw",
            str(document.pk),
            user=name,
            reason="outdated",
            stdout=StringIO(),
        )
        assert withdrawn(document)
        call_command("document", "restore", str(document.pk), user=name, stdout=StringIO())
        assert not withdrawn(document)
        return
    code = "permission_denied" if REFUSAL[role] == 403 else "not_found"
    with pytest.raises(CommandError, match=code):
        call_command("document", "withdraw", str(document.pk), user=name, stdout=StringIO())
    assert not withdrawn(document)


@pytest.mark.parametrize("role", ROLES)
def test_cli_erase(people, document, role):
    name, revision = people[role].username, document.revisions.get()
    arguments = [
        "document",
        "erase",
        str(document.pk),
        "--revision",
        str(revision.pk),
        "--user",
        name,
        "--reason",
        "leaked",
    ]
    if allowed(role):
        out = StringIO()
        call_command(*arguments, stdout=out)
        assert f"revision {revision.pk} (r1) of document {document.pk}: text erased" in (
            out.getvalue()
        )
    else:
        code = "permission_denied" if REFUSAL[role] == 403 else "not_found"
        with pytest.raises(CommandError, match=code):
            call_command(*arguments, stdout=StringIO())
    assert erased(document) == allowed(role)


def test_cli_says_which_spaces_exist_and_who_is_unknown(people, space, tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"Text.")
    listed = re.escape("No space is named or numbered 'Nope'. Spaces: 'Elsewhere', 'Operations'")
    with pytest.raises(CommandError, match=listed):
        call_command("ingest", str(path), space="Nope", user="owner")
    with pytest.raises(CommandError, match="No active user is named 'nobody'"):
        call_command("ingest", str(path), space=space.name, user="nobody")


# --- admin -------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_admin_withdraw_and_restore(people, owner, document, role):
    user = people[role]
    user.is_staff = True  # admin opens to staff; what they may change comes from their roles
    user.save()
    client = Client()
    client.force_login(user)
    url = "/admin/knowledge/document/"
    response = client.post(url, {"action": "withdraw_selected", "_selected_action": [document.pk]})
    assert withdrawn(document) == allowed(role)
    if role == "reader":
        assert response.status_code == 403  # curates nothing: admin's documents are closed
    if allowed(role):
        response = client.post(
            url, {"action": "restore_selected", "_selected_action": [document.pk]}
        )
        assert response.status_code == 302
        assert not withdrawn(document)


@pytest.mark.parametrize("role", ROLES)
def test_admin_erase(people, document, role):
    user = people[role]
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    revision = document.revisions.get()
    url = f"/admin/knowledge/documentrevision/{revision.pk}/erase/"
    form = client.get(url)
    response = client.post(url, {"reason": "leaked"})
    if allowed(role):
        assert form.status_code == 200 and b'name="reason"' in form.content
        assert response.status_code == 302
        page = client.get(f"/admin/knowledge/documentrevision/{revision.pk}/change/")
        assert b"Text erased on" in page.content
        log = client.get("/admin/knowledge/erasure/")
        assert log.status_code == 200 and b"leaked" in log.content
    else:  # a reader curates nothing: admin is closed; others do not see the revision
        assert form.status_code in (403, 404) and response.status_code in (403, 404)
    assert erased(document) == allowed(role)


def test_admin_erase_without_a_reason_says_so(people, document):
    client = Client()
    client.force_login(people["superuser"])
    revision = document.revisions.get()
    response = client.post(
        f"/admin/knowledge/documentrevision/{revision.pk}/erase/", {"reason": "  "}
    )
    assert response.status_code == 200 and b"Say why the text is erased" in response.content
    assert not erased(document)


def test_admin_revision_page_links_its_file_and_shows_no_save_button(people, owner, document):
    owner.is_staff = True
    owner.save()
    client = Client()
    client.force_login(owner)
    revision = document.revisions.get()
    page = client.get(f"/admin/knowledge/documentrevision/{revision.pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    link = f"/admin/knowledge/documentrevision/{revision.pk}/file/"
    assert link.encode() in page.content
    download = client.get(link)
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == b"Invoices are kept for ten years."
    assert "policy.txt" in download["Content-Disposition"]
    # Another space's curator sees neither the page nor the file.
    other = people["other_curator"]
    other.is_staff = True
    other.save()
    client.force_login(other)
    assert client.get(link).status_code == 404


def test_admin_names_memory_entries_properly(people):
    client = Client()
    client.force_login(people["superuser"])
    page = client.get("/admin/")
    assert b"Memory entries" in page.content
    assert b"Memory entrys" not in page.content


# --- the library pages (the browser form) ------------------------------------------


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("role", ROLES)
def test_library_upload(people, space, role):
    response = page_client(people[role]).post(
        f"/spaces/{space.pk}/documents/",
        {
            "file": [
                SimpleUploadedFile("one.txt", b"First text."),
                SimpleUploadedFile("two.md", b"# Two\n\nSecond text."),
            ]
        },
    )
    assert response.status_code == (302 if allowed(role) else REFUSAL[role])
    titles = set(Document.objects.values_list("title", flat=True))
    assert ({"one", "Two"} <= titles or {"one", "two"} <= titles) == allowed(role)
    if not allowed(role):
        assert not ({"one", "two", "Two"} & titles)


@pytest.mark.parametrize("role", ROLES)
def test_library_new_revision(people, space, document, role):
    response = page_client(people[role]).post(
        f"/spaces/{space.pk}/documents/",
        {
            "file": SimpleUploadedFile("policy.txt", b"Invoices are kept for twelve years."),
            "document": document.pk,
        },
    )
    assert response.status_code == (302 if allowed(role) else REFUSAL[role])
    assert revisions(document) == (2 if allowed(role) else 1)


@pytest.mark.parametrize("role", ROLES)
def test_library_withdraw_and_restore(people, owner, space, document, role):
    client = page_client(people[role])
    base = f"/spaces/{space.pk}/documents/{document.pk}"
    response = client.post(f"{base}/withdraw/", {"reason": "outdated"})
    assert response.status_code == (302 if allowed(role) else REFUSAL[role])
    assert withdrawn(document) == allowed(role)
    if not allowed(role):
        document_withdraw(user=owner, document=document)
    response = client.post(f"{base}/restore/")
    assert response.status_code == (302 if allowed(role) else REFUSAL[role])
    assert withdrawn(document) == (not allowed(role))


@pytest.mark.parametrize("role", ROLES)
def test_library_erase(people, space, document, role):
    revision = document.revisions.get()
    response = page_client(people[role]).post(
        f"/spaces/{space.pk}/documents/{document.pk}/erase/",
        {"revision": revision.pk, "reason": "leaked", "confirm": "yes"},
    )
    assert response.status_code == (302 if allowed(role) else REFUSAL[role])
    assert erased(document) == allowed(role)


@pytest.mark.parametrize("role", ROLES)
def test_library_erase_asks_first_and_changes_nothing_until_confirmed(
    people, space, document, role
):
    revision = document.revisions.get()
    url = f"/spaces/{space.pk}/documents/{document.pk}/erase/"
    asked = page_client(people[role]).post(url, {"revision": revision.pk, "reason": "leaked"})
    assert not erased(document)
    assert asked.status_code == (200 if allowed(role) else REFUSAL[role])
    if not allowed(role):
        return
    page = asked.content.decode()
    assert "Erase the text of “policy”, revision 1?" in page
    assert "Its passages and their vectors" in page  # what it removes
    assert "exports made before, downloaded receipts" in page  # what it cannot reach
    assert 'name="confirm" value="yes"' in page and 'value="leaked"' in page
    assert f'href="/spaces/{space.pk}/#document-{document.pk}"' in page  # a way back
    confirmed = page_client(people[role]).post(
        url, {"revision": revision.pk, "reason": "leaked", "confirm": "yes"}
    )
    assert confirmed.status_code == 302 and erased(document)


def test_library_erase_refusals_are_clear(people, space, document):
    client = page_client(people["curator"])
    url = f"/spaces/{space.pk}/documents/{document.pk}/erase/"
    revision = document.revisions.get()
    no_reason = client.post(url, {"revision": revision.pk, "reason": "", "confirm": "yes"})
    assert no_reason.status_code == 422 and "Say why the text is erased" in no_reason.text
    assert client.post(url, {"revision": "nope", "reason": "x"}).status_code == 404
    assert client.post(url, {"reason": "x", "confirm": "yes"}).status_code == 404
    erase = {"revision": revision.pk, "reason": "leaked", "confirm": "yes"}
    assert client.post(url, erase).status_code == 302
    twice = client.post(url, {**erase, "reason": "again"})
    assert twice.status_code == 409 and "already erased" in twice.text
    page = client.get(f"/spaces/{space.pk}/")
    assert "Text erased" in page.text


def test_library_page_shows_curators_the_forms_and_readers_the_list(people, space, document):
    curator = page_client(people["curator"]).get(f"/spaces/{space.pk}/")
    assert curator.status_code == 200
    assert b"Add documents to this space" in curator.content
    assert b"Supported: PDF (.pdf)" in curator.content
    assert b"policy" in curator.content
    reader = page_client(people["reader"]).get(f"/spaces/{space.pk}/")
    assert reader.status_code == 200
    assert b"policy" in reader.content
    assert b"Add documents to this space" not in reader.content
    assert b"data-withdraw" not in reader.content and b"data-erase" not in reader.content
    assert b"data-erase" in curator.content
    assert page_client(people["outsider"]).get(f"/spaces/{space.pk}/").status_code == 404
    listing = page_client(people["reader"]).get("/spaces/")
    assert b"Operations" in listing.content and b"Elsewhere" not in listing.content


def test_library_refuses_one_bad_file_and_keeps_the_others(people, space):
    response = page_client(people["curator"]).post(
        f"/spaces/{space.pk}/documents/",
        {
            "file": [
                SimpleUploadedFile("good.txt", b"Good text."),
                SimpleUploadedFile("photo.png", b"\x89PNG\r\n\x1a\nxxxx"),
                SimpleUploadedFile("empty.txt", b""),
            ]
        },
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 202
    files = {f["name"]: f for f in response.json()["files"]}
    assert files["good.txt"]["ok"] is True
    assert files["photo.png"]["code"] == "unsupported_type"
    assert "Supported: PDF (.pdf), Word (.docx)" in files["photo.png"]["message"]
    assert files["empty.txt"]["ok"] is False
    assert list(Document.objects.values_list("title", flat=True)) == ["good"]


def test_library_upload_without_a_file_is_a_clear_error(people, space):
    client = page_client(people["curator"])
    response = client.post(
        f"/spaces/{space.pk}/documents/", {}, headers={"Accept": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["error"]["message"] == "Choose one or more files."
    assert client.post("/spaces/abc/documents/").status_code == 404
    assert client.post("/spaces/999999/documents/").status_code == 404
