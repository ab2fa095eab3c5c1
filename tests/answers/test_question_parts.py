"""How a question splits into parts searched for and judged on their own (issue 47): only
into questions of their own. A fragment judged alone is answered by any sentence about it
("at Trump Tower in New York City" by a sentence about another Trump Tower), and an answer
to a fragment released as a partial answer is no answer."""

import pytest

from answers.pipeline.question_parts import searches_for


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "Who owns service reviews, what currency is the invoice dataset in, and what is "
            "the total amount of the invoices?",
            [
                "Who owns service reviews",
                "what currency is the invoice dataset in",
                "what is the total amount of the invoices",
            ],
        ),
        (
            "Who owns service reviews and what is the retention period for invoices?",
            ["Who owns service reviews", "what is the retention period for invoices"],
        ),
        (
            "Who founded the guild and in which year was it chartered?",
            ["Who founded the guild", "in which year was it chartered"],
        ),
        (
            "Who owns service reviews, which currency are invoice amounts stated in, and where "
            "is the backup kept?",
            [
                "Who owns service reviews",
                "which currency are invoice amounts stated in",
                "where is the backup kept",
            ],
        ),
        (
            "Who approves refunds, where are refunds recorded?",
            ["Who approves refunds", "where are refunds recorded"],
        ),
        (
            "What is the retention period for invoices; who approves refunds?",
            ["What is the retention period for invoices", "who approves refunds"],
        ),
    ],
)
def test_a_question_of_several_questions_splits_into_them(question: str, parts: list) -> None:
    assert searches_for(question) == parts


@pytest.mark.parametrize(
    "question",
    [
        # "and" between names, a date's comma, the alternatives asked between.
        "What is the capital of Trinidad and Tobago?",
        "Which campaign was formally launched on June 16, 2015, at Trump Tower in New York?",
        "Which band has more members, Kitchens of Distinction or Royal Blood?",
        # A relative clause after a comma belongs to its question.
        "Who wrote the charter, which was signed by the members in 1990?",
        "Who founded the company, whose headquarters are in Lyon?",
        "Which office holds the archive, where the records of 1990 are kept?",
        "Who signed the charter, which the members approved in 1990?",
        # Quoted text is a name: its "and" splits nothing.
        'What city did the author of "Portraits and Prayers, what a book" choose to live in?',
        "What does the setting “backups and what they keep” control?",
        # "and" followed by more of the same question.
        "Which company was founded in 1990 and has its headquarters in Paris?",
    ],
)
def test_one_question_is_never_cut_into_fragments(question: str) -> None:
    assert searches_for(question) == [question]


def test_a_piece_of_fewer_than_two_content_words_is_no_part() -> None:
    # "and when" asks no searchable question of its own: the whole question is searched.
    question = "Who approved the retention policy, and when?"
    assert searches_for(question) == [question]


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What sport is played by both Justin Gimelstob and Angelique Kerber?",
            [
                "What sport is played by Justin Gimelstob",
                "What sport is played by Angelique Kerber",
            ],
        ),
        (
            "Which files are needed by both the server and the worker?",
            ["Which files are needed by the server", "Which files are needed by the worker"],
        ),
        (
            "Is the backup both encrypted and signed?",
            ["Is the backup encrypted", "Is the backup signed"],
        ),
        (
            "Are the Python client and the Go client both able to verify receipts?",
            [
                "Are the Python client able to verify receipts",
                "Are the Go client able to verify receipts",
            ],
        ),
    ],
)
def test_a_question_asking_the_same_of_both_of_two_things_is_asked_of_each(
    question: str, parts: list
) -> None:
    assert searches_for(question) == parts


def test_both_inside_quotation_marks_or_mid_question_asks_nothing_twice() -> None:
    quoted = 'Who wrote "Both Sides and Neither"?'
    assert searches_for(quoted) == [quoted]
    # Not at the question's end: "both … and …" governs more than the two names.
    middle = "Were both the backup and the archive encrypted, and who holds the key?"
    assert searches_for(middle) == [
        "Were both the backup and the archive encrypted",
        "who holds the key",
    ]
