"""The question-set pages (issue 47, item 6): curators only, the form and the uploads, the
report with its examples and curve, and the operating point set from it."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from answers.models import QuestionSet, QuestionSetRun, SetQuestion
from answers.pipeline import lifecycle
from answers.question_sets.services import question_set_run_execute
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import (
    AUTO_POINT,
    BACKUPS,
    CAFETERIA,
    PORTS,
    SET_ROWS,
    OverlapProvider,
    ingest,
)
from tests.helpers import make_user

pytestmark = pytest.mark.django_db


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload(client, space, name: str, data: bytes, *, named: str = "questions.csv"):
    return client.post(
        f"/spaces/{space.pk}/questions/",
        {"name": name, "file": SimpleUploadedFile(named, data)},
    )


CSV = "question,answer\n" + "".join(f"{q},{a}\n" for q, a, _ in SET_ROWS)


@pytest.fixture
def answered_set(space, owner, monkeypatch):
    ingest(owner, space, "ports.txt", PORTS)
    ingest(owner, space, "backups.txt", BACKUPS)
    ingest(owner, space, "cafeteria.txt", CAFETERIA)
    monkeypatch.setattr(lifecycle, "get_model_provider", OverlapProvider)
    client = browser(owner)
    response = upload(client, space, "Handbook", CSV.encode())
    assert response.status_code == 302
    question_set = QuestionSet.objects.get()
    response = client.post(
        f"/spaces/{space.pk}/questions/{question_set.pk}/run/", {"policy": "auto"}
    )
    assert response.status_code == 302
    question_set_run_execute(run_id=QuestionSetRun.objects.get().pk)  # the task's work
    return question_set


def test_the_page_shows_the_figures_their_examples_and_the_curve(answered_set, space, owner):
    page = browser(owner).get(f"/spaces/{space.pk}/questions/{answered_set.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    for outcome, count in (("supported", 2), ("wrong", 1), ("abstained", 1)):
        assert f'<tr data-figure="{outcome}">' in html
        section = html.split(f'data-examples="{outcome}"')[1].split("</section>")[0]
        assert section.count("data-example=") == count
    assert "Sundays at 04:00" in html.split('data-examples="wrong"')[1]
    assert f'data-threshold="{AUTO_POINT}"' in html and 'data-threshold="0.94"' in html
    assert "<polyline" in html and "<script" not in html.split("<main")[-1]
    at = browser(owner).get(f"/spaces/{space.pk}/questions/{answered_set.pk}/?at=0.56")
    section = at.content.decode().split('data-examples="supported"')[1].split("</section>")[0]
    assert section.count("data-example=") == 1  # the cafeteria's 0.55 quote is not kept


def test_the_curator_moves_the_spaces_point_along_the_curve_never_below_the_floor(
    answered_set, space, owner
):
    client = browser(owner)
    run = QuestionSetRun.objects.get()
    url = f"/spaces/{space.pk}/operating-point/"
    fields = {"set": answered_set.pk, "run": run.pk}
    refused = client.post(url, {**fields, "point": "0.4"}, follow=True)
    assert f"never judges below {AUTO_POINT}" in refused.content.decode()
    space.refresh_from_db()
    assert space.operating_point is None
    client.post(url, {**fields, "point": "0.56"})
    space.refresh_from_db()
    assert space.operating_point == 0.56
    client.post(url, {"set": answered_set.pk, "point": ""})
    space.refresh_from_db()
    assert space.operating_point is None


def test_the_pages_their_buttons_and_their_refusals_speak_the_curators_language(
    answered_set, space, owner
):
    client = browser(owner)
    assert client.post("/i18n/setlang/", {"language": "de", "next": "/"}).status_code == 302
    url = f"/spaces/{space.pk}/questions/{answered_set.pk}/"
    html = client.get(url).content.decode()
    assert '<html lang="de">' in html
    for german in (
        "Fragenkataloge",
        "Diese Fragen jetzt stellen",
        "mit den erwarteten Worten beantwortet",
        "Wenn die Messlatte höher läge",
        "Präzision (durchgezogen)",
        "Diesen Bereich mit 0,56 bewerten",  # numbers for people in German
    ):
        assert german in html, german
    assert "answered with the expected words" not in html and "If the bar were higher" not in html
    # Numbers for machines stay as they are: the row's button sets the point it names.
    assert 'data-threshold="0.56"' in html and 'name="point" value="0.56"' in html
    assert client.get(f"{url}?at=0.56").status_code == 200
    run = QuestionSetRun.objects.get()
    fields = {"set": answered_set.pk, "run": run.pk}
    refused = client.post(
        f"/spaces/{space.pk}/operating-point/", {**fields, "point": "0,4"}, follow=True
    )
    floor = f"{AUTO_POINT:.2f}".replace(".", ",")
    assert f"Die Richtlinie auto bewertet nie unter {floor}" in refused.content.decode()
    done = client.post(
        f"/spaces/{space.pk}/operating-point/", {**fields, "point": "0,56"}, follow=True
    )
    assert "mindestens 0,56" in done.content.decode()
    space.refresh_from_db()
    assert space.operating_point == 0.56
    bad = upload(client, space, "Schlecht", b"question,answer\n,8443\n")
    assert "Zeile 2: Die Zeile enthält keine Frage." in bad.content.decode()
    for language, heading in (("fr", "Jeux de questions"), ("ja", "質問セット")):
        client.post("/i18n/setlang/", {"language": language, "next": "/"})
        assert heading in client.get(f"/spaces/{space.pk}/questions/").content.decode()


def test_only_the_spaces_curators_reach_its_question_sets(
    answered_set, space, member, outsider, staff
):
    other_curator = make_user("other-curator")
    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username=other_curator.username, role="curator")
    run = QuestionSetRun.objects.get()
    for user in (member, outsider, other_curator):
        client = browser(user)
        base = f"/spaces/{space.pk}/questions/"
        assert client.get(base).status_code == 404
        assert client.get(f"{base}{answered_set.pk}/").status_code == 404
        assert client.post(base, {"name": "x", "question_1": "Which port?"}).status_code == 404
        assert client.post(f"{base}{answered_set.pk}/run/", {"policy": "auto"}).status_code == 404
        response = client.post(
            f"/spaces/{space.pk}/operating-point/",
            {"set": answered_set.pk, "run": run.pk, "point": "0.9"},
        )
        assert response.status_code == 404
    # Another curator's space does not open this space's set either.
    assert (
        browser(other_curator).get(f"/spaces/{other.pk}/questions/{answered_set.pk}/").status_code
        == 404
    )
    assert QuestionSetRun.objects.count() == 1 and QuestionSet.objects.count() == 1
    space.refresh_from_db()
    assert space.operating_point is None


def test_a_set_written_in_the_browser_is_saved(space, owner):
    client = browser(owner)
    response = client.post(
        f"/spaces/{space.pk}/questions/",
        {
            "name": "Written",
            "question_1": "Which port does the service listen on?",
            "answer_1": "8443",
            "question_3": "Who is the chief executive?",
        },
    )
    assert response.status_code == 302
    rows = list(SetQuestion.objects.values_list("position", "text", "expected"))
    assert rows == [
        (1, "Which port does the service listen on?", "8443"),
        (2, "Who is the chief executive?", ""),
    ]


def test_a_set_name_postgresql_cannot_store_is_refused_not_a_500(space, owner):
    """Issue 48 (4): the page reads the name from the raw form; a NUL in it is refused
    (422, the name named) and nothing is saved."""
    response = browser(owner).post(
        f"/spaces/{space.pk}/questions/",
        {"name": "Writ\x00ten", "question_1": "Which port does the service listen on?"},
    )
    assert response.status_code == 422
    assert not SetQuestion.objects.exists()


def test_a_jsonl_upload_is_saved(space, owner):
    data = "\n".join(json.dumps({"question": q, "answer": a}) for q, a, _ in SET_ROWS).encode()
    response = upload(browser(owner), space, "Lines", data, named="questions.jsonl")
    assert response.status_code == 302
    assert SetQuestion.objects.count() == len(SET_ROWS)


@pytest.mark.parametrize(
    ("data", "named", "message"),
    [
        (b"prompt,expected\nWhich port?,8443\n", "q.csv", "names the columns"),
        (b"", "q.csv", "holds no questions"),
        (b"question\n" + b"x" * (1024 * 1024 + 1), "q.csv", "at most 1024 KiB"),
        ("question\nQuelle équipe?\n".encode("latin-1"), "q.csv", "not UTF-8"),
        (b"question,answer\n,8443\n", "q.csv", "Line 2: The row has no question."),
        (b"question\nWhich port?\nwhich  PORT?\n", "q.csv", "The same question as line 2."),
        (b"%PDF-1.7\n\x00\x01", "q.csv", "not a text file"),
        (b"question\nWhich port?\n", "q.pdf", "a .csv or .jsonl file"),
        (b'{"question": "x"}\n{"question": 1}\n', "q.jsonl", "Line 2"),
    ],
)
def test_a_bad_upload_is_refused_with_its_reason_and_saves_nothing(
    space, owner, data, named, message
):
    response = upload(browser(owner), space, "Bad", data, named=named)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not QuestionSet.objects.exists() and not SetQuestion.objects.exists()


def test_a_browser_form_without_any_question_saves_nothing(space, owner):
    response = browser(owner).post(f"/spaces/{space.pk}/questions/", {"name": "Empty"})
    assert response.status_code == 422
    assert not QuestionSet.objects.exists()


def test_the_library_links_curators_to_question_sets(space, owner, member):
    link = f'href="/spaces/{space.pk}/questions/"'
    assert link in browser(owner).get(f"/spaces/{space.pk}/").content.decode()
    assert link not in browser(member).get(f"/spaces/{space.pk}/").content.decode()
