"""The sentence segmenter and the label rule (knowledge/sentences.py)."""

import pytest

from knowledge.sentences import code_names, is_label, is_question, sentence_spans


def sentences(text: str) -> list[str]:
    spans = sentence_spans(text)
    assert all(text[a:b] == text[a:b].strip() for a, b in spans)  # exact, trimmed slices
    return [text[a:b] for a, b in spans]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Dr. Smith met Mr. Jones at 10 a.m. on Monday. They spoke.",
            ["Dr. Smith met Mr. Jones at 10 a.m. on Monday.", "They spoke."],
        ),
        (
            "It costs approx. 40 euros, e.g. for a night. See No. 5 for more.",
            ["It costs approx. 40 euros, e.g. for a night.", "See No. 5 for more."],
        ),
        ("He said no. Then he left.", ["He said no.", "Then he left."]),
    ],
)
def test_abbreviations_do_not_end_a_sentence(text, expected):
    assert sentences(text) == expected


def test_initials_stay_with_their_name():
    assert sentences("The Hobbit is by J. R. R. Tolkien. It appeared in 1937.") == [
        "The Hobbit is by J. R. R. Tolkien.",
        "It appeared in 1937.",
    ]


def test_decimals_and_versions_stay_whole():
    assert sentences("The rate rose to 3.5 percent in v2.1.4 of the plan. Next.") == [
        "The rate rose to 3.5 percent in v2.1.4 of the plan.",
        "Next.",
    ]


def test_dotted_identifiers_and_dot_files_stay_whole():
    text = (
        "pip supports loading credentials from a user's .netrc file. "
        "Set diff.relative to true to see paths relative to the directory."
    )
    assert sentences(text) == [
        "pip supports loading credentials from a user's .netrc file.",
        "Set diff.relative to true to see paths relative to the directory.",
    ]


def test_a_wrapped_line_is_one_sentence_and_a_blank_line_ends_one():
    text = "Hotel costs are reimbursed up to 180 euros per night in capital\ncities.\n\nHeading"
    assert sentences(text) == [
        "Hotel costs are reimbursed up to 180 euros per night in capital\ncities.",
        "Heading",
    ]


def test_closing_quotes_and_brackets_belong_to_the_sentence():
    assert sentences('He wrote "It is done." Then (at last.) It was.') == [
        'He wrote "It is done."',
        "Then (at last.)",
        "It was.",
    ]
    # A lower-case word after the mark continues the sentence.
    assert sentences("It ended (at last.) and then it was over.") == [
        "It ended (at last.) and then it was over."
    ]


def test_list_items_are_sentences_of_their_own():
    text = "Bring:\n- a passport\n- a ticket\n1. check in\n2) board"
    assert sentences(text) == ["Bring:", "- a passport", "- a ticket", "1. check in", "2) board"]


def test_a_question_and_an_exclamation_end_sentences():
    assert sentences("Is it open? Yes! It is.") == ["Is it open?", "Yes!", "It is."]


def test_spans_can_be_limited_to_a_range():
    text = "Skip this. Keep this one. And this."
    start = text.index("Keep")
    assert [text[a:b] for a, b in sentence_spans(text, start, len(text))] == [
        "Keep this one.",
        "And this.",
    ]


@pytest.mark.parametrize(
    "label",
    ["Retention", "First Battle of Bull Run", "Travel policy", "Amount (EUR)", "Q3 2026"],
)
def test_headings_titles_and_table_headers_are_labels(label):
    assert is_label(label)


@pytest.mark.parametrize(
    "heading",
    [
        "2.1 Follow-up work on the archive",
        "3 Invoking the parser from a shell",
        "4.2.1. Limits of the upload service",
        "3.1 Invoking asn1Parser............................................ 5",
        "2.1 ASN.1 syntax. . . . . . . . . . . 2",
    ],
)
def test_numbered_headings_and_contents_entries_are_labels(heading):
    assert is_label(heading)


def test_a_label_is_what_repeats_its_heading_or_the_title():
    assert is_label(
        "Service reviews in the first week", headings=["Service reviews in the first week"]
    )
    assert is_label(
        "List of Nobel laureates in Physics", title="List of Nobel laureates in Physics"
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "Invoices are retained for ten years.",
        "The platform operations team owns service reviews.",
        "Economy class is used for flights shorter than six hours",  # a list item, no stop
        "2. Move the archive to the new storage cluster",  # a numbered item, no stop
        "3 copies of every backup are kept in two places",
    ],
)
def test_sentences_are_not_labels(sentence):
    assert not is_label(sentence, headings=["Retention"], title="Accounting policy")


@pytest.mark.parametrize(
    ("sentence", "asks"),
    [
        ("Who is collecting my information?", True),
        ("WHO IS COLLECTING MY INFORMATION AND HOW WILL IT BE USED?", True),
        ('He asked: "Is it encrypted?"', True),
        ("キャッシュはいつ消去されますか？", True),
        ("The society collects it. Who else?  ", True),
        ("The society collects the information you give us.", False),
        ("Is it encrypted? Yes, with AES.", False),
    ],
)
def test_a_sentence_that_asks(sentence: str, asks: bool) -> None:
    assert is_question(sentence) is asks


def test_code_names_are_options_snake_case_dotted_and_camel_case_names():
    text = (
        "Does --pages or -k take ffi_type_uint8, pdfplumber.Page or extractText, e.g. in "
        "the U.S., for a well-known version 0.7.1 of McDonald's --pages?"
    )
    assert code_names(text) == ["--pages", "-k", "ffi_type_uint8", "pdfplumber.Page", "extractText"]
