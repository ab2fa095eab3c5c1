"""A PDF's page furniture is gone before segmentation, the same way in both readings
(knowledge/extraction/pdf_layout.py, issue 51 item 4).

Nothing here touches the database.
"""

from pathlib import Path

import pytest

from knowledge.chunking import chunk
from knowledge.extraction import ROLES, Limits, extract
from knowledge.extraction.damage import extraction_damage
from knowledge.extraction.pdf import extract_primary, extract_secondary
from knowledge.extraction.pdf_layout import pages_clean
from knowledge.normalise import normalised_key
from knowledge.sentences import is_label, sentence_spans
from tests.knowledge.helpers import HANDBOOK_PAGES, furnished_pdf, report_pdf

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pdf"
LIMITS = Limits(max_chars=1_000_000, max_pages=100)
FULL = "The backup service keeps every nightly copy for ninety days and reports to the team."
BODY = [
    "Restores are tested every month by the operations team and written down in the log.",
    "Every incident gets a written review within five working days of the outage ending.",
    "Copies older than ninety days are deleted automatically unless a legal hold is set.",
    "The handbook covers every service that the operations team deploys on the platform.",
    "Hosting costs rose in line with storage, and staff costs did not change this year.",
    "Measured availability was above the agreed level in every month of the quarter.",
]


def cleaned(*pages: str) -> list[str]:
    return pages_clean(list(pages))


def sentences(text: str) -> list[str]:
    return [" ".join(text[a:b].split()) for a, b in sentence_spans(text)]


# --- the rules, on page texts --------------------------------------------------------


def test_running_headers_and_footers_go_modulo_their_digits():
    pages = [f"Operations Handbook Version 3\n{BODY[n]}\nPage {n} of 3 {n}" for n in (0, 1, 2)]
    assert cleaned(*pages) == BODY[:3]


def test_a_line_repeated_mid_page_stays():
    pages = [f"{FULL}\n{BODY[n]}\nSee the service log.\n{BODY[n]}\n{FULL}" for n in (0, 1, 2)]
    assert cleaned(*pages) == [f"{BODY[n]}\nSee the service log.\n{BODY[n]}" for n in (0, 1, 2)]


def test_alternating_headers_go():
    odd, even = "Platform Operations Q3", "Quarterly Report: Platform Operations"
    pages = [f"{odd if n % 2 else even}\n{BODY[n]}" for n in (1, 2, 3, 4)]
    assert cleaned(*pages) == BODY[1:5]  # each on half the pages


def test_a_chapter_header_with_its_page_number_goes_from_two_pages_on():
    pages = [f"Chapter 1: Setup {n}\n{BODY[n]}" for n in (0, 1)]
    pages += [f"Chapter 2: Backups {n}\n{BODY[n]}" for n in (2, 3)]
    pages += [f"Chapter 3: Incidents 5\n{BODY[4]}", BODY[5]]
    assert cleaned(*pages)[:4] == BODY[:4]
    assert cleaned(*pages)[4].startswith("Chapter 3: Incidents 5\n")  # once: not known to run


def test_a_page_of_nothing_but_running_lines_keeps_them():
    pages = [f"Ticket {n} of the spring draw\n{n}" for n in (1, 2, 3)]
    assert cleaned(*pages) == [f"Ticket {n} of the spring draw" for n in (1, 2, 3)]


def test_a_page_number_goes_at_a_page_edge_even_on_a_single_page():
    assert cleaned(f"- 1 -\n{FULL}\n1") == [FULL]
    assert cleaned(f"iv\n{FULL}") == [FULL]
    assert "\nPage 12\n" in cleaned(f"{FULL}\nPage 12\n{FULL}")[0]  # not at an edge: stays


def test_a_bare_section_number_before_its_heading_goes():
    assert cleaned(f"Intro text ends here.\n2\nBackups\n{FULL}") == [
        f"Intro text ends here.\n\nBackups\n\n{FULL}"
    ]


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        ("Its man-\nagement of backups.", "Its management\nof backups."),
        ("The end-to-\nend tests run.", "The end-to-end\ntests run."),  # a hyphen of its own
        ("Ask Jean-\nPierre today.", "Ask Jean-Pierre\ntoday."),  # a capital after it
        ("Since COVID-\n19 we test.", "Since COVID-19\nwe test."),
        ("It is well-\nknown. A well-known fact.", "It is well-known.\nA well-known fact."),
        ("Each customer-\nfacing page. A customer. Facing it.", None),  # both words alone
        ("A loca-\ntion.", "A location."),  # the last word of its line moves up whole
    ],
)
def test_hyphenated_line_breaks_join_and_real_hyphens_stay(lines, joined):
    result = cleaned(lines)[0]
    if joined is None:
        assert result.startswith("Each customer-facing\npage.")
    else:
        assert result == joined


def test_a_hyphenated_word_over_a_page_break_joins_on_the_first_page():
    assert cleaned(f"{FULL}\nin a separate, offline loca-", "tion that two people reach.") == [
        f"{FULL}\nin a separate, offline location",
        "that two people reach.",
    ]


def test_a_heading_becomes_its_own_paragraph_but_a_wrapped_line_does_not():
    page = (
        "1 Introduction\n"
        "This handbook describes how the operations team runs the platform for\n"
        "Alice Smith and every other engineer who is on call during the night.\n"
        "Scope\n"
        "The handbook covers every service that the operations team deploys."
    )
    text = cleaned(page)[0]
    assert sentences(text) == [
        "1 Introduction",
        "This handbook describes how the operations team runs the platform for Alice Smith "
        "and every other engineer who is on call during the night.",
        "Scope",
        "The handbook covers every service that the operations team deploys.",
    ]


# --- both readings of the fixture PDFs -------------------------------------------------


def fixture_pdfs() -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(FIXTURES.glob("*.pdf"))}


def test_the_repository_has_pdf_fixtures_with_furniture():
    assert set(fixture_pdfs()) == {"handbook.pdf", "report.pdf"}
    raw = extract_primary(fixture_pdfs()["handbook.pdf"], LIMITS, clean=False).text
    assert "Page 2 of 3" in raw and "man-\nagement" in raw  # what the cleaning is for


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", ["handbook.pdf", "report.pdf"])
def test_passages_hold_no_furniture_and_no_line_break_hyphen(name, role):
    result = extract("pdf", fixture_pdfs()[name], role=role)
    for span in chunk(result.text, result.segments):
        passage = result.text[span.char_start : span.char_end]
        for furniture in ("Operations Handbook", "Version 3", "Page ", "Platform Operations"):
            assert furniture not in passage
        assert not any(line.strip().isdigit() for line in passage.splitlines())
        assert "-\n" not in passage
    assert extraction_damage(result.text) == 0.0  # the damage measure still reads it clean


@pytest.mark.parametrize("role", ROLES)
def test_the_handbook_reads_joined_words_and_headings_apart(role):
    text = extract("pdf", furnished_pdf(HANDBOOK_PAGES), role=role).text
    found = sentences(text)
    assert "1 Introduction" in found and "2.1 Retention" in found and "Backups" in found
    assert all(is_label(heading) for heading in ("1 Introduction", "2.1 Retention", "Backups"))
    assert (
        "Restores are tested every month by the operations team, and each restore test is "
        "written down in the service log together with the time it took."
    ) in found
    assert "The end-to-end tests of the platform run every night" in text.replace("\n", " ")
    assert "well-known places" in text


@pytest.mark.parametrize("role", ROLES)
def test_the_report_keeps_its_list_and_its_compound(role):
    text = extract("pdf", report_pdf(), role=role).text
    found = sentences(text)
    assert "Availability" in found and "2.1 Follow-up work" in found
    assert "Renew every certificate through the automated job." in found
    assert "customer-facing status page" in text.replace("\n", " ")
    assert "The monitoring configuration is reviewed" in text.replace("\n", " ")


@pytest.mark.parametrize("data", [furnished_pdf(HANDBOOK_PAGES), report_pdf()])
def test_every_sentence_of_one_reading_is_in_the_other(data):
    primary = extract_primary(data, LIMITS)
    secondary = extract_secondary(data, LIMITS)
    assert primary.text == secondary.text  # these fixtures read alike: a strict check
    key = normalised_key(secondary.text)
    for start, end in sentence_spans(primary.text):
        assert normalised_key(primary.text[start:end]) in key


def test_page_locators_stay_with_their_pages():
    result = extract("pdf", furnished_pdf(HANDBOOK_PAGES), role="primary")
    assert [s.locator["page"] for s in result.segments] == [1, 2, 3]
    assert result.text[result.segments[2].char_start :].startswith("that only two people")
