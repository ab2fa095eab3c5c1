"""A space's own question set (issue 47, item 6): its figures against a hand count, run
through the real pipeline as a reader of the space would ask; only its curators may run or
see it; the space's operating point never below the policy's floor, and recorded in the
receipts of later answers."""

import json

import pytest

from answers.models import AnswerRun, QuestionSetRun, SetQuestion
from answers.models import SetQuestionResult as Result
from answers.pipeline import lifecycle
from answers.question_sets.parsing import QuestionFileInvalid, QuestionRow, questions_parse
from answers.question_sets.selectors import (
    question_set_get_for_curator,
    question_set_run_report,
    question_sets_of_space,
)
from answers.question_sets.services import (
    question_set_create,
    question_set_run_execute,
    question_set_run_start,
    space_operating_point_set,
)
from audit.models import OutputRelease
from audit.receipts import body_hashes
from core.errors import NotFoundError, UnprocessableError
from knowledge.services import space_create, space_member_set
from tests.answers.helpers import (
    AUTO_POINT,
    BACKUPS,
    CAFETERIA,
    PORTS,
    SET_ROWS,
    STRICT_POINT,
    OverlapProvider,
    ask,
    ingest,
)
from tests.helpers import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def documents(space, owner):
    ingest(owner, space, "ports.txt", PORTS)
    ingest(owner, space, "backups.txt", BACKUPS)
    ingest(owner, space, "cafeteria.txt", CAFETERIA)


@pytest.fixture
def provider(monkeypatch):
    """The pipeline's provider for runs that name none (the question set's): scripted
    selection and judge scores, everything else real."""
    monkeypatch.setattr(lifecycle, "get_model_provider", OverlapProvider)


@pytest.fixture
def question_set(space, owner):
    rows = [QuestionRow(n, q, a) for n, (q, a, _) in enumerate(SET_ROWS, start=2)]
    return question_set_create(user=owner, space=space, name="Handbook questions", rows=rows)


def run_set(question_set, user, mode: str = "auto", capture=None) -> QuestionSetRun:
    run = question_set_run_start(user=user, question_set=question_set, mode=mode)
    question_set_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_a_sets_figures_match_the_hand_count(documents, provider, question_set, owner):
    run = run_set(question_set, owner)
    assert run.status == QuestionSetRun.Status.DONE
    assert AUTO_POINT < 0.55 < 0.56 < STRICT_POINT  # the fixture's scores straddle the points
    assert (run.floor, run.operating_point) == (AUTO_POINT, AUTO_POINT)
    outcomes = {
        r.question.text: r.outcome
        for r in Result.objects.filter(run=run).select_related("question")
    }
    assert outcomes == {question: outcome for question, _, outcome in SET_ROWS}
    report = question_set_run_report(run=run)
    figures = report.figures
    assert (figures.supported, figures.wrong, figures.abstained, figures.failed) == (2, 1, 1, 0)
    assert (figures.supported_rate, figures.wrong_rate, figures.abstained_rate) == (0.5, 0.25, 0.25)
    assert figures.precision == round(2 / 3, 3) and figures.coverage == round(2 / 3, 3)
    # The examples behind each figure are its questions, with what was released.
    [wrong] = report.examples["wrong"]
    assert wrong["question"] == "When do the backups run on weekends?"
    assert [q["quote"] for q in wrong["quotes"]] == [BACKUPS]
    [abstained] = report.examples["abstained"]
    assert abstained["expected"] == "" and abstained["quotes"] == []
    supported = {e["question"]: e for e in report.examples["supported"]}
    cafeteria = supported["When does the cafeteria open?"]
    assert cafeteria["quotes"] == [{"quote": CAFETERIA, "score": 0.55}]
    assert cafeteria["best_score"] == 0.55
    # The curve from the stored scores, without asking again: at 0.56 the cafeteria's
    # 0.55 quote is no longer released; at 0.90 every quote still is, above it none.
    by_threshold = {row.threshold: row for row in report.curve}
    assert report.curve[0].threshold == AUTO_POINT
    assert (by_threshold[0.56].supported, by_threshold[0.56].abstained) == (1, 2)
    assert (by_threshold[0.9].supported, by_threshold[0.9].wrong) == (1, 1)
    assert (by_threshold[0.92].supported, by_threshold[0.92].abstained) == (0, 4)
    assert min(by_threshold) == AUTO_POINT  # nothing below the point the run judged at


def test_each_question_is_a_sealed_answer_asked_within_the_space_alone(
    documents, provider, question_set, owner, staff
):
    """As a reader of the space: an explicit policy (no memory), the space only, no files.
    A document the curator reads in another space does not answer the set's question."""
    other = space_create(name="Elsewhere", created_by=staff)
    space_member_set(space=other, username=owner.username, role="curator")
    ingest(owner, other, "ceo.txt", "The chief executive is Ada Example.")
    run = run_set(question_set, owner)
    results = Result.objects.filter(run=run).select_related("answer_run")
    for result in results:
        answer_run = result.answer_run
        assert answer_run.space_ids == [question_set.space_id]
        assert answer_run.explicit_policy and answer_run.policy["mode"] == "auto"
        assert answer_run.selected_sources == []
        assert OutputRelease.objects.filter(run=answer_run).exists()
    assert results.get(question__text="Who is the chief executive?").outcome == "abstained"


def test_a_strict_run_judges_at_stricts_point(documents, provider, question_set, owner):
    run = run_set(question_set, owner, mode="strict")
    assert (run.floor, run.operating_point) == (STRICT_POINT, STRICT_POINT)
    outcome = Result.objects.get(run=run, question__text="When does the cafeteria open?").outcome
    assert outcome == "abstained"  # scored 0.55


def test_only_the_spaces_curators_may_create_run_or_see_a_set(
    question_set, space, owner, member, outsider, staff
):
    other_curator = make_user("other-curator")
    other = space_create(name="Other", created_by=staff)
    space_member_set(space=other, username=other_curator.username, role="curator")
    rows = [QuestionRow(2, "Which port?", "8443")]
    for user in (member, outsider, other_curator):  # staff created the space: a curator
        assert not question_sets_of_space(user=user, space=space).exists()
        with pytest.raises(NotFoundError):
            question_set_get_for_curator(user=user, space=space, set_id=question_set.pk)
        with pytest.raises(NotFoundError):
            question_set_create(user=user, space=space, name="mine", rows=rows)
        with pytest.raises(NotFoundError):
            question_set_run_start(user=user, question_set=question_set, mode="auto")
        with pytest.raises(NotFoundError):
            space_operating_point_set(user=user, space=space, point=0.6)
    assert question_set_get_for_curator(user=owner, space=space, set_id=question_set.pk)
    assert not QuestionSetRun.objects.exists()


def test_a_run_started_by_someone_no_longer_curating_asks_nothing(question_set, owner, space):
    run = question_set_run_start(user=owner, question_set=question_set, mode="auto")
    space_member_set(space=space, username=owner.username, role="reader")
    question_set_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == QuestionSetRun.Status.FAILED
    assert not Result.objects.exists() and not AnswerRun.objects.exists()


def test_a_run_executes_once(documents, provider, question_set, owner):
    run = run_set(question_set, owner)
    question_set_run_execute(run_id=run.pk)  # a redelivered task
    assert Result.objects.filter(run=run).count() == len(SET_ROWS)


def test_a_run_is_queued_after_commit(question_set, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        run = question_set_run_start(user=owner, question_set=question_set, mode="auto")
    assert run.status == QuestionSetRun.Status.QUEUED and len(callbacks) == 1


def test_a_policy_other_than_auto_or_strict_is_refused(question_set, owner):
    with pytest.raises(UnprocessableError) as refused:
        question_set_run_start(user=owner, question_set=question_set, mode="general_knowledge")
    assert refused.value.error_code == "invalid_policy"


@pytest.mark.parametrize(("mode", "point"), [("auto", 0.47), ("auto", 0.2), ("strict", 0.57)])
def test_a_space_point_below_the_policys_floor_is_refused(
    documents, provider, question_set, owner, space, mode, point
):
    run = run_set(question_set, owner, mode=mode)
    with pytest.raises(UnprocessableError) as refused:
        space_operating_point_set(user=owner, space=space, point=point, run=run)
    assert refused.value.error_code == "operating_point_below_floor"
    space.refresh_from_db()
    assert space.operating_point is None


@pytest.mark.parametrize("point", [0.0, 1.0, -0.5, 1.5])
def test_a_space_point_outside_zero_to_one_is_refused(space, owner, point):
    with pytest.raises(UnprocessableError) as refused:
        space_operating_point_set(user=owner, space=space, point=point)
    assert refused.value.error_code == "operating_point_invalid"


def test_later_answers_judge_at_the_spaces_point_and_their_receipts_record_it(
    documents, space, owner, member
):
    provider = OverlapProvider()
    before = ask(member, "When does the cafeteria open?", provider=provider)
    assert before["evidence"]["answer_status"] == "evidence_backed"
    assert before["evidence"]["policy"]["operating_point"] == AUTO_POINT
    space_operating_point_set(user=owner, space=space, point=0.6)
    space.refresh_from_db()
    assert (space.operating_point, space.operating_point_set_by) == (0.6, owner)
    # The cafeteria's 0.55 quote is no longer released in this space, under auto.
    refused = ask(member, "When does the cafeteria open?", provider=provider)
    assert refused["evidence"]["answer_status"] == "abstained"
    body = ask(member, "Which port does the service listen on?", provider=provider)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert body["evidence"]["policy"]["operating_point"] == 0.6
    release = OutputRelease.objects.get(run_id=body["run_id"])
    assert release.policy_sha256 == body_hashes(body)["policy_sha256"]
    stored = AnswerRun.objects.get(pk=body["run_id"]).response
    assert stored["evidence"]["policy"]["operating_point"] == 0.6
    # Strict judges at the higher of its own floor and the space's point.
    strict = ask(
        member,
        "Which port does the service listen on?",
        provider=provider,
        evidence_policy={"mode": "strict"},
    )
    assert strict["evidence"]["policy"]["operating_point"] == max(STRICT_POINT, 0.6)
    space_operating_point_set(user=owner, space=space, point=None)
    again = ask(member, "When does the cafeteria open?", provider=provider)
    assert again["evidence"]["policy"]["operating_point"] == AUTO_POINT


def test_a_run_over_several_spaces_judges_at_the_strictest(documents, space, owner, member, staff):
    other = space_create(name="Lenient", created_by=staff)
    space_member_set(space=other, username=owner.username, role="curator")
    space_member_set(space=other, username=member.username, role="reader")
    space_operating_point_set(user=owner, space=space, point=0.62)
    space_operating_point_set(user=owner, space=other, point=round(AUTO_POINT + 0.02, 2))
    body = ask(member, "Which port does the service listen on?", provider=OverlapProvider())
    assert body["evidence"]["policy"]["operating_point"] == 0.62
    only_other = ask(
        member,
        "Which port does the service listen on?",
        provider=OverlapProvider(),
        space_ids=[other.pk],
    )
    assert only_other["evidence"]["answer_status"] == "abstained"  # nothing in that space


# --- uploads ------------------------------------------------------------------------


def test_a_csv_file_gives_its_questions():
    data = (
        b"question,answer\n"
        b"Which port does the service listen on?,8443\n"
        b'"When, exactly, do backups run?",02:00 UTC\n'
        b"Who is the chief executive?,\n"
    )
    rows = questions_parse(data, file_format="csv")
    assert [(r.line, r.question, r.expected) for r in rows] == [
        (2, "Which port does the service listen on?", "8443"),
        (3, "When, exactly, do backups run?", "02:00 UTC"),
        (4, "Who is the chief executive?", ""),
    ]


def test_a_csv_file_without_an_answer_column_is_all_not_answerable():
    rows = questions_parse(b"question\nWho is the chief executive?\n", file_format="csv")
    assert [(r.question, r.expected) for r in rows] == [("Who is the chief executive?", "")]


def test_a_jsonl_file_gives_its_questions():
    lines = [
        {"question": "Which port does the service listen on?", "answer": "8443"},
        {"question": "Who is the chief executive?", "answer": None},
        {"question": "When does the cafeteria open?"},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode() + b"\n\n"
    rows = questions_parse(data, file_format="jsonl")
    assert [(r.line, r.expected) for r in rows] == [(1, "8443"), (2, ""), (3, "")]


def refusal(data: bytes, file_format: str = "csv") -> QuestionFileInvalid:
    with pytest.raises(QuestionFileInvalid) as refused:
        questions_parse(data, file_format=file_format)
    return refused.value


def test_bad_files_are_refused_with_a_typed_error():
    assert refusal(b"").error_code == "empty_file"
    assert refusal(b"  \n\n").error_code == "empty_file"
    assert refusal(b"question,answer\n").error_code == "empty_file"
    assert refusal(b"prompt,expected\nWhich port?,8443\n").error_code == "wrong_columns"
    assert refusal(b"question,answer,notes\nWhich port?,8443,x\n").error_code == "wrong_columns"
    assert refusal("question\nQuelle équipe?\n".encode("latin-1")).error_code == "not_utf8"
    assert refusal(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").error_code == "not_utf8"
    assert refusal(b"question\x00,answer\nx,y\n").error_code == "not_text"
    assert refusal(b'question,answer\n"Which port?,8443\n').error_code == "not_csv"
    assert refusal(b"question\n" + b"x" * (1024 * 1024)).error_code == "too_large"
    many = "question\n" + "".join(f"Question {n}?\n" for n in range(501))
    assert refusal(many.encode()).error_code == "too_many_questions"
    assert refusal(b"not json\n", "jsonl").error_code == "invalid_rows"


def test_every_bad_row_is_named_by_its_line():
    data = (
        b"question,answer\n"
        b"Which port does the service listen on?,8443\n"
        b",8443\n"
        b"which port does the   service listen on?,8443\n"
        b"Too many,fields,here\n"
    )
    refused = refusal(data)
    assert refused.error_code == "invalid_rows"
    assert [(line, code) for line, code, _ in refused.lines] == [
        (3, "question_missing"),
        (4, "duplicate_question"),
        (5, "wrong_field_count"),
    ]
    assert "line 4" in refused.fields and "line 2" in refused.fields["line 4"]


def test_bad_jsonl_rows_are_named_by_their_line():
    data = b'{"question": "Which port?"}\n[1, 2]\n{"question": "x", "notes": 1}\n{"answer": "y"}\n'
    refused = refusal(data, "jsonl")
    assert [(line, code) for line, code, _ in refused.lines] == [
        (2, "not_json"),
        (3, "wrong_keys"),
        (4, "question_missing"),
    ]


def test_a_refused_file_saves_nothing(space, owner):
    from answers.models import QuestionSet

    with pytest.raises(QuestionFileInvalid):
        question_set_create(
            user=owner,
            space=space,
            name="bad",
            rows=questions_parse(b"question\nfine?\n\xff\n", file_format="csv"),
        )
    assert not QuestionSet.objects.exists() and not SetQuestion.objects.exists()
