"""Quote units that follow the document's structure (issue 47): a lead-in and the list it
introduces, a definition term and its description, a table row with its header, a label
and the value under it — each released as one verbatim span, through both quote checks,
with one citation; never glued across a heading; never a heading or a label alone.

Ingested through the real path (both extractors, chunking), asked through the real
pipeline with the extractive provider and the local support judge."""

import pytest

from answers.judge.model import local_judge
from answers.models import CandidateFact
from audit.services import audit_summary
from knowledge.models import Extraction, Passage
from knowledge.normalise import normalised_key
from knowledge.retrieval import _CANDIDATE_FIELDS, Candidate, retrieve
from knowledge.scope import access_scope_build
from knowledge.sentences import is_label
from knowledge.units import candidates_widen
from tests.answers.helpers import ask, ingest

pytestmark = pytest.mark.django_db

FERRY = (
    "# Harbour ferry\n\n## Feedback\n\nWe read every message within a week. Complaints about "
    "the ferry can be sent to the following address:\n\n- Ferry Office\n- 12 Harbour Road\n"
    "- Portsmouth PO1 2AB\n\n## Timetable\n\nThe first ferry leaves at 06:10.\n"
)
FERRY_UNIT = (
    "Complaints about the ferry can be sent to the following address:\n\nFerry Office\n\n"
    "12 Harbour Road\n\nPortsmouth PO1 2AB"
)
SETTINGS = (
    "<html><body><h1>Server settings</h1><dl>"
    "<dt>upload_max_mb</dt><dd>Limits the size of a file a person may upload, in "
    "megabytes.</dd>"
    "<dt>session_days</dt><dd>Sets how many days a sign-in lasts.</dd>"
    "</dl></body></html>"
)
DEFAULTS = (
    "# Service defaults\n\n| Setting | Default | Meaning |\n|---|---|---|\n"
    "| port | 8080 | The port the service listens on |\n"
    "| timeout | 30 s | The longest a request may take before it is cancelled |\n"
)
CONTACTS = "Harbour contacts\n\nHarbour master emergency number\n\n0800 123 456\n"
PLAIN_LEAD_IN = (
    "Lost property\n\nItems left on board can be collected from the following place:\n"
    "- the ticket office on Pier 3\n- open daily from 8 to 18\n"
)

CHANGES = (
    "Changelog\n=========\n\n"
    "widgetlib 2.1\n-------------\n\n*Release date: 8 March 2021*\n\n- Fix the parser.\n\n"
    "Known issues\n~~~~~~~~~~~~\n\nNone.\n\n"
    "widgetlib 2.0\n-------------\n\n*Release date: 4 January 2021*\n\n- First stable release.\n"
)


def released(body: dict) -> list[dict]:
    return [c for c in body["answer"]["citations"] if c["kind"] == "quote"]


def assert_verbatim_twice(body: dict, citation: dict) -> None:
    """The quote is a slice of the admitted text that serves passages (check a) and its
    words are in the other admitted reading (check b); the run's validation passed."""
    readings = Extraction.objects.filter(revision_id=citation["revision_id"], status="admitted")
    serving = readings.get(serves_passages=True)
    other = readings.get(serves_passages=False)
    assert citation["quote"] in serving.text
    assert normalised_key(citation["quote"]) in other.norm_text
    [generation] = audit_summary(body["run_id"])["generations"]
    validations = [s["ok"] for s in generation["steps"] if s["step"] == "validation"]
    assert validations and validations[-1] is True


def unit_scores(body: dict, unit: str) -> list[float]:
    """The judge's scores of the unit as the run's judgement recorded them."""
    [generation] = audit_summary(body["run_id"])["generations"]
    facts = {f.fact_id: f for f in CandidateFact.objects.filter(run_id=body["run_id"])}
    scores = []
    for step in generation["steps"]:
        for verdict in step.get("verdicts") or []:
            fact = facts[verdict["fact_id"]]
            if fact.text[verdict["start"] : verdict["end"]] == unit:
                scores += verdict["scores"].values()
    return scores


def released_whole(body: dict, unit: str) -> dict:
    """The answer's one citation is the whole unit, verbatim twice (its judge scores are
    shown when it was not released)."""
    assert body["evidence"]["answer_status"] == "evidence_backed", unit_scores(body, unit)
    [citation] = released(body)
    assert citation["quote"] == unit
    assert_verbatim_twice(body, citation)
    return citation


@pytest.fixture(autouse=True)
def _judge_present():
    local_judge()  # the real judge: a missing model fails here, not as an abstention


def test_a_lead_in_is_released_with_the_list_it_introduces(space, owner, member):
    ingest(owner, space, "ferry.md", FERRY)
    body = ask(member, "Where can complaints about the ferry be sent?")
    citation = released_whole(body, FERRY_UNIT)
    assert citation["locator"] == {"headings": ["Harbour ferry", "Feedback"]}


def test_a_definition_term_is_released_with_its_description(space, owner, member):
    ingest(owner, space, "settings.html", SETTINGS)
    body = ask(member, "Which setting limits the size of an upload?")
    unit = "upload_max_mb\n\nLimits the size of a file a person may upload, in megabytes."
    released_whole(body, unit)


def test_a_table_row_is_released_with_the_header_just_above_it(space, owner, member):
    ingest(owner, space, "defaults.md", DEFAULTS)
    body = ask(member, "Which port does the service listen on by default?")
    unit = "Setting\n\nDefault\n\nMeaning\n\nport\n\n8080\n\nThe port the service listens on"
    released_whole(body, unit)


def test_a_row_further_down_is_released_whole_without_a_header_it_does_not_touch(
    space, owner, member
):
    ingest(owner, space, "defaults.md", DEFAULTS)
    body = ask(member, "How long may a request take before it is cancelled?")
    unit = "timeout\n\n30 s\n\nThe longest a request may take before it is cancelled"
    released_whole(body, unit)


def test_a_label_is_released_with_the_value_under_it(space, owner, member):
    ingest(owner, space, "contacts.txt", CONTACTS)
    body = ask(member, "What is the harbour master's emergency number?")
    unit = "Harbour master emergency number\n\n0800 123 456"
    released_whole(body, unit)


def test_a_plain_text_lead_in_is_released_with_its_lines(space, owner, member):
    ingest(owner, space, "lost-property.txt", PLAIN_LEAD_IN)
    body = ask(member, "Where can items left on board be collected?")
    unit = PLAIN_LEAD_IN.split("\n\n", 1)[1].strip()
    released_whole(body, unit)


def test_a_heading_is_never_glued_to_prose_nor_quoted_alone(space, owner, member):
    ingest(owner, space, "ferry.md", FERRY)
    body = ask(member, "When does the first ferry leave?")
    assert body["evidence"]["answer_status"] == "evidence_backed"
    [citation] = released(body)
    assert citation["quote"] == "The first ferry leaves at 06:10."
    for fact in CandidateFact.objects.filter(run_id=body["run_id"]):
        for start, end, _, _ in fact.source["units"]:
            unit = fact.text[start:end]
            assert "Timetable" not in unit and "Feedback" not in unit  # no unit takes a heading
    assert not is_label(citation["quote"], headings=citation["locator"]["headings"])


def test_a_hit_on_a_heading_alone_stands_for_the_section_under_it(space, owner, member):
    # Underlined titles of a plain text are headings (knowledge.extraction.text); a title
    # is never quoted, so a hit on one becomes the text under it, up to the next heading.
    ingest(owner, space, "changes.txt", CHANGES)
    passages = {
        p.text: Candidate(*(getattr(p, name) for name in _CANDIDATE_FIELDS))
        for p in Passage.objects.filter(is_current=True)
    }
    scope = access_scope_build(user=member)
    heading, body, top = (
        passages["widgetlib 2.1"],
        passages["- Fix the parser."],
        passages["Changelog"],
    )
    section, unchanged, same = candidates_widen(scope=scope, candidates=[heading, body, top])
    assert section.text == "*Release date: 8 March 2021*\n\n- Fix the parser."  # not "Known issues"
    assert section.locator == {"headings": ["Changelog", "widgetlib 2.1"]}
    assert section.passage_id == heading.passage_id
    assert (unchanged.char_start, unchanged.char_end) == (body.char_start, body.char_end)
    # A title with a title right under it opens no text of its own: unchanged.
    assert same.text == "Changelog"
    # Retrieval finds the title: the words of the question meet there only.
    found = retrieve(scope=scope, query="widgetlib 2.1", limit=10).candidates
    assert heading.passage_id in [c.passage_id for c in found]


def test_a_line_under_a_release_title_is_read_as_that_releases(space, owner, member):
    ingest(owner, space, "changes.txt", CHANGES)
    body = ask(member, "When was widgetlib 2.1 released?")
    citation = released_whole(body, "*Release date: 8 March 2021*")
    assert citation["locator"] == {"headings": ["Changelog", "widgetlib 2.1"]}
