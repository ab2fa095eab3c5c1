"""Answer-type agreement (issue 47, item 2): a question that asks for a thing of a kind is
answered only by a unit that holds one; an on-topic unit without it is not support."""

import pytest

from answers.pipeline.answer_type import (
    Kind,
    alternatives,
    answer_type_agrees,
    focus_terms,
    question_kind,
    unit_has_kind,
)
from audit.services import audit_summary
from tests.answers.helpers import ask, ingest

# (question, its kind, an on-topic unit without the asked thing, the unit that has it)
CASES = [
    (
        "Which command restarts the server?",
        "identifier",
        "The server can be restarted from the command line.",
        "Run `koinon restart` to restart the server.",
    ),
    (
        "Which function parses the configuration?",
        "identifier",
        "The configuration is parsed by a function when the server starts.",
        "The configuration is parsed by config_parse() when the server starts.",
    ),
    (
        "Which option limits the upload size?",
        "identifier",
        "An option limits the upload size.",
        "The --max-upload option limits the upload size.",
    ),
    (
        "Which environment variable sets the log level?",
        "identifier",
        "The log level is set by an environment variable.",
        "The log level is set by KOINON_LOG_LEVEL.",
    ),
    (
        "Which file holds the configuration?",
        "identifier",
        "The configuration is kept in a file.",
        "The configuration is kept in koinon.toml.",
    ),
    (
        "Which path are the backups written to?",
        "identifier",
        "Backups are written to a path chosen at installation.",
        "Backups are written to /var/backups/koinon.",
    ),
    (
        "Which tool rotates the logs?",
        "identifier",
        "Logs are rotated every week and old files are compressed.",
        "Logs are rotated by logrotate every week.",
    ),
    (
        # A definition term above its description names the thing described.
        "Which parameter sets the prefix for the progress bar?",
        "identifier",
        "Sets the prefix for the progress bar.\nThe prefix is shown before the bar.",
        "desc : str, optional\n    Prefix for the progress bar.",
    ),
    (
        "Which port does the service listen on?",
        "port",
        "The service listens on a port chosen at installation.",
        "The service listens on port 8443.",
    ),
    (
        "Where do I send complaints about the ferry?",
        "place",
        "Complaints about the ferry can be sent to the following address:",
        "Complaints about the ferry can be sent to complaints@ferry.example.org.",
    ),
    (
        "Where is the reset button?",
        "place",
        "The reset button restores the factory settings.",
        "The reset button is on the back of the device.",
    ),
    (
        "Where was the treaty signed?",
        "place",
        "The treaty was signed after long negotiations.",
        "The treaty was signed in Utrecht.",
    ),
    (
        "When is the cache cleared?",
        "time",
        "The cache is cleared at a time chosen by the administrator.",
        "The cache is cleared every night at 02:00.",
    ),
    (
        "In what year did the Normans conquer England?",
        "time",
        "The Normans conquered England with a large army.",
        "The Normans conquered England in 1066.",
    ),
    (
        # A year before 1000 is a year too.
        "When did the Moors first invade Spain?",
        "time",
        "Troops formed by Moors from northern Africa first invaded Spain with 711 ships.",
        "In 711, troops formed by Moors from northern Africa first invaded Spain.",
    ),
    (
        "How many users can connect at once?",
        "quantity",
        "Several users can connect at once.",
        "Up to 25 users can connect at once.",
    ),
    (
        # A count is not a share: "how many" is not answered by percentages alone.
        "How many people died in the flood?",
        "quantity",
        "Of the people who died in the flood, 54 percent died at home and 32% outdoors.",
        "The flood killed 158 people; 54 percent of them died at home.",
    ),
    (
        "How much does the annual licence cost?",
        "quantity",
        "The annual licence cost depends on the plan.",
        "The annual licence costs 1,200 euros.",
    ),
    (
        "Who approves refunds?",
        "agent",
        "Refunds are approved within the refund process.",
        "Refunds are approved by the finance team.",
    ),
    (
        "Who wrote the first draft of the charter?",
        "agent",
        "The first draft of the charter was written in a hurry.",
        "The first draft of the charter was written by Ada Lovelace.",
    ),
    (
        "Who owns service reviews?",
        "agent",
        "Service reviews are owned by someone.",
        "Service reviews are owned by the reliability guild.",  # a passive's agent
    ),
    (
        "Which values can the mode take?",
        "values",
        "The mode controls how files are synchronised.",
        "The mode can be fast, safe or off.",
    ),
    (
        "Does the service support IPv6?",
        "yes_no",
        "The service supports several network protocols.",
        "The service does not support IPv6.",
    ),
    (
        # A question that names its alternatives is answered by a unit naming one of them:
        # a sentence about another band's members answers nothing here.
        "Which band has more members, Kitchens of Distinction or Royal Blood?",
        "choice",
        "Super Junior is a South Korean boy band that had thirteen members.",
        "Royal Blood's two members are Mike Kerr and Ben Thatcher.",
    ),
    (
        "Which backup runs first, the nightly snapshot or the weekly archive?",
        "choice",
        "Backups run in the order the administrator chose at installation.",
        "The nightly snapshot runs before any other backup.",
    ),
]


@pytest.mark.parametrize(("question", "kind", "without", "with_it"), CASES)
def test_an_on_topic_unit_without_the_asked_thing_is_rejected_the_one_with_it_accepted(
    question: str, kind: Kind, without: str, with_it: str
) -> None:
    assert question_kind(question) == kind
    focus = focus_terms(question)
    assert not unit_has_kind(without, kind, focus, question)
    assert unit_has_kind(with_it, kind, focus, question)


@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of France?",
        "How do I reset the remote?",
        "Why was the treaty signed?",
        "What happens when the cache is full?",
        "What is the function of the mitochondria?",
        "Is the file stored locally or in the cloud?",
        # Other languages: no rule reads them, so no gate.
        "Wann wird der Cache geleert?",
        "Combien d'utilisateurs peuvent se connecter ?",
        "キャッシュはいつ消去されますか？",
    ],
)
def test_a_question_whose_kind_is_unclear_is_not_gated(question: str) -> None:
    assert question_kind(question) is None
    assert answer_type_agrees(question, "An unrelated sentence about something else.")


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("Who was born first, Ada Lovelace or Grace Hopper?", ("Ada Lovelace", "Grace Hopper")),
        ("Which is older, the charter or the treaty?", ("charter", "treaty")),
        # Not alternatives: "or" without a comma before them, or a clause, not a name.
        ("Is the file stored locally or in the cloud?", None),
        # A list, not a choice: the question before it does not ask which, or has a comma.
        ("How to play, pause or rewind live TV?", None),
        (
            "In the context of chemistry, what is an attribute of a substance as a consequence "
            "of its atomic, molecular or aggregate structure?",
            None,
        ),
        ("Which file or folder holds the logs?", None),
        (
            "Which report, the one the board wrote after the long meeting in spring or the "
            "other one?",
            None,
        ),
    ],
)
def test_the_alternatives_a_question_names(question: str, named: tuple | None) -> None:
    assert alternatives(question) == named


def test_an_alternative_is_named_by_half_of_its_words() -> None:
    question = "Which Persian historical figure was an astronomer, Al-Karaji or Ahmad Nahavandi?"
    # Another spelling of the same name still names it.
    assert answer_type_agrees(
        question, "Ahmad ibn Muhammad al-Nahawandi was a Persian astronomer of the 8th century."
    )
    assert not answer_type_agrees(
        question, "Omar Khayyam was a Persian astronomer and poet of the 11th century."
    )


def test_a_share_answers_how_many_when_the_question_asks_for_one() -> None:
    unit = "Of the people who died in the flood, 54 percent died at home."
    assert answer_type_agrees("What percentage of the people died at home?", unit)
    # The end of a name is no count: "COVID-19", "BCV-AKS-01".
    assert not answer_type_agrees(
        "How many strains were sequenced?", "The strains BCV-AKS-01 and COVID-19 were sequenced."
    )


# (question, a unit stating only the other end of what is asked, a unit stating it)
OPPOSED = [
    (
        "When does the NFL season end?",
        "The 2019 NFL season will begin on September 5, 2019.",
        "The season will conclude with the Super Bowl on February 2, 2020.",
    ),
    (
        "When did Victor Emmanuel II die?",
        "Victor Emmanuel II was born on 14 March 1820 in Turin.",
        "Victor Emmanuel II (born 14 March 1820) died in Rome on 9 January 1878.",
    ),
    (
        "What is the maximum upload size?",
        "The minimum upload size is 1 MB.",
        "Uploads of up to 2 GB are accepted; the maximum can be raised by an administrator.",
    ),
    (
        "Which command disables the cache?",
        "Run `koinon cache on` to enable the cache.",
        "Run `koinon cache off` to disable the cache.",
    ),
]


@pytest.mark.parametrize(("question", "other_end", "asked_end"), OPPOSED)
def test_a_unit_stating_only_the_other_end_of_what_is_asked_is_rejected(
    question: str, other_end: str, asked_end: str
) -> None:
    assert not answer_type_agrees(question, other_end)
    assert answer_type_agrees(question, asked_end)


def test_the_other_end_may_answer_a_yes_no_question_or_stand_beside_the_asked_one() -> None:
    # "Is the cache enabled by default?" "It is disabled by default." answers it: no.
    assert answer_type_agrees(
        "Is the cache enabled by default?", "The cache is disabled by default."
    )
    # Both ends named: the unit may hold the asked one.
    assert answer_type_agrees(
        "When did Ada Lovelace die?", "Ada Lovelace, born in 1815, died in 1852."
    )
    # A premiere is a start; "end up with" and "at the end of" name no end.
    assert answer_type_agrees(
        "When does the second half of season 8 start?",
        "Season 8 premiered on October 22, 2017, and concluded on April 15, 2018.",
    )
    assert not answer_type_agrees(
        "When does the second half of season 8 end?", "Season 8 premiered on October 22, 2017."
    )
    assert answer_type_agrees(
        "Who does Claire end up with?", "Claire and Alex Ryan begin a relationship."
    )
    assert answer_type_agrees(
        "Who dies at the end of the film?", "The police start to shoot at Merrimen."
    )
    # A question about neither end is not touched by either.
    assert answer_type_agrees(
        "When was the treaty signed?",
        "The negotiations began in 1712; the treaty was signed in 1713.",
    )


def test_a_thing_the_question_already_names_is_not_the_asked_thing() -> None:
    # "Microsoft" and "2019" come from the question: they answer nothing.
    assert not answer_type_agrees(
        "Who founded Microsoft?", "Microsoft was founded to sell software."
    )
    assert not answer_type_agrees(
        "How many people attended the 2019 meeting?", "People attended the 2019 meeting gladly."
    )


def test_in_a_long_unit_the_asked_thing_must_stand_near_the_question_s_words() -> None:
    filler = " ".join(["Unrelated words fill this part of the paragraph."] * 5)
    far = f"The release of version 4 came out in 2019. {filler} The cache is cleared often."
    near = f"{filler} The cache is cleared on Sundays at 02:00."
    assert not answer_type_agrees("When is the cache cleared?", far)
    assert answer_type_agrees("When is the cache cleared?", near)


# --- through the real pipeline ---------------------------------------------------------

PORT_QUESTION = "Which port does the gateway service listen on?"
PORT_WITHOUT = "The gateway service listens on a network port chosen during installation."
PORT_WITH = "By default the gateway service listens on port 8443 for incoming connections."


def _quotes(body: dict) -> list[str]:
    return [c["quote"] for c in body["answer"]["citations"] if c["kind"] == "quote"]


def _verdicts(body: dict) -> list[dict]:
    [generation] = audit_summary(body["run_id"])["generations"]
    return [v for s in generation["steps"] if s["step"] == "judgement" for v in s["verdicts"]]


@pytest.mark.django_db
def test_of_two_on_topic_sentences_the_one_naming_the_port_is_released(space, owner, member):
    ingest(owner, space, "gateway.txt", f"Gateway service\n\n{PORT_WITHOUT} {PORT_WITH}\n")
    body = ask(member, PORT_QUESTION)
    assert body["evidence"]["answer_status"] == "evidence_backed"
    assert any("8443" in quote for quote in _quotes(body))
    assert not any(quote.strip() == PORT_WITHOUT for quote in _quotes(body))


@pytest.mark.django_db
def test_with_only_the_sentence_naming_no_port_the_answer_abstains(space, owner, member):
    ingest(owner, space, "gateway.txt", f"Gateway service\n\n{PORT_WITHOUT}\n")
    body = ask(member, PORT_QUESTION)
    assert body["evidence"]["answer_status"] == "abstained"
    assert body["answer"]["citations"] == []
    verdicts = _verdicts(body)
    assert verdicts and not any(v["supported"] for v in verdicts)
    # The judge let it through; the answer-type gate is what rejected it, and says so.
    assert any(v["answer_type_missing"] == [0] for v in verdicts)


def test_a_yes_no_unit_may_leave_the_subject_to_its_context() -> None:
    assert answer_type_agrees("Is the backup file encrypted?", "It is encrypted with AES.")
    assert not answer_type_agrees("Is the backup file encrypted?", "The backup file is large.")


def test_a_unit_that_asks_a_question_answers_nothing() -> None:
    # An FAQ's heading shares every word with the question and answers none of it.
    faq = "WHO IS COLLECTING MY INFORMATION AND HOW WILL IT BE USED?"
    assert not answer_type_agrees("Who is collecting my information?", faq)
    assert not answer_type_agrees("What happens to my information?", faq)  # no kind asked
    assert not answer_type_agrees("How is the cache cleared?", "Why is the cache cleared？")
    assert answer_type_agrees(
        "Who is collecting my information?",
        "Who collects it? The Science Society collects the information you give us.",
    )


FAQ_QUESTION = "Who is collecting my information?"
FAQ_HEADING = "WHO IS COLLECTING MY INFORMATION AND HOW WILL IT BE USED?"
FAQ_ANSWER = "The Science Society collects the information you give us when you register."


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("after_the_heading", "status"),
    [(FAQ_ANSWER, "evidence_backed"), ("See the next page.", "abstained")],
)
def test_an_faq_s_question_is_never_released_its_answer_is(
    space, owner, member, after_the_heading, status
):
    ingest(owner, space, "privacy.txt", f"Privacy\n\n{FAQ_HEADING}\n\n{after_the_heading}\n")
    body = ask(member, FAQ_QUESTION)
    assert body["evidence"]["answer_status"] == status, body["evidence"]
    assert not any(quote.strip().endswith("?") for quote in _quotes(body))
    assert any(FAQ_ANSWER in quote for quote in _quotes(body)) == (status == "evidence_backed")
