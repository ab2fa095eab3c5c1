"""The damage measure of an extracted text (knowledge.extraction.damage): pure, no database."""

import pytest

from knowledge.extraction.damage import (
    LONG_WORD,
    extraction_damage,
    extraction_is_damaged,
    serving_role,
)
from tests.settings_checks import django_setup_with

THRESHOLD = 0.15  # the default of KOINON_EXTRACTION_DAMAGE_THRESHOLD

CLEAN = (
    "The platform operations team owns service reviews. Each review covers availability, "
    "incidents and open risks. Responsibilities for internationalization are shared "
    "between the regional teams, and the counterrevolutionaries of the style guide lost."
)
# What pdfplumber reads from lines whose words are placed by kerning (tests/knowledge/helpers.py).
GLUED = (
    "Thebackupservicekeepseverynightlycopyforninetydaysbeforedeletion.\n\n"
    "Restoresaretestedeverymonthbytheoperationsteam."
)
CODE = """def get_element_by_id(self, element_id: str) -> Element:
    return self.document.querySelector("#" + element_id)  # see http://example.com/a_b

class AbstractSingletonProxyFactoryBean(FactoryBean<Object>):
    pass"""
URLS = (
    "See https://developer.mozilla.org/en-US/docs/Web/API/Document/getElementById and "
    "mailto:someone.with.a.long.name@example-organisation.com, or C:\\Program "
    "Files\\VeryLongDirectoryNameWithoutSpaces\\configuration_settings.ini"
)
IDENTIFIERS_IN_PROSE = (
    "Call getElementById to find the node, then send it with XMLHttpRequest; HTMLParser "
    "reads the reply and Console.WriteLine prints it. AbstractSingletonProxyFactoryBean "
    "comes from Spring, and iPhone, JavaScript and PostgreSQL are names."
)
GERMAN = (
    "Die Datenschutz-Grundverordnung regelt, wie Unternehmen personenbezogene Daten "
    "verarbeiten dürfen. Der Informationssicherheitsbeauftragte prüft einmal im Jahr "
    "gemeinsam mit dem Betriebsrat, ob die Abteilungen die Vorgaben einhalten. Er "
    "berichtet der Geschäftsführung über Abweichungen, schlägt Maßnahmen vor und setzt "
    "Fristen. Neue Mitarbeiterinnen und Mitarbeiter werden in der ersten Woche geschult; "
    "die Schulung wird jedes Jahr wiederholt. Wer Fragen zur Verarbeitung hat, wendet sich "
    "an das Sekretariat, das die Anfrage innerhalb von zwei Wochen beantwortet"
)


def test_clean_prose_measures_no_damage():
    assert extraction_damage(CLEAN) == 0.0


def test_prose_glued_by_an_extractor_is_damaged():
    damage = extraction_damage(GLUED)
    assert damage == 1.0
    assert extraction_is_damaged(damage, threshold=THRESHOLD)


def test_the_share_weighs_glued_words_by_their_letters():
    glued_line = "Thebackupservicekeepseverynightlycopy"
    clean_line = "Restores are tested every month by the operations team"
    glued, clean = len(glued_line), len(clean_line.replace(" ", ""))
    assert (glued, clean) == (37, 46)
    assert extraction_damage(f"{glued_line}\n{clean_line}") == pytest.approx(37 / (37 + 46))


def test_a_word_of_the_long_word_limit_counts_one_letter_less_does_not():
    assert extraction_damage("a" * LONG_WORD) == 1.0
    assert extraction_damage("a" * (LONG_WORD - 1)) == 0.0


def test_code_is_not_damage():
    assert extraction_damage(CODE) == 0.0


def test_urls_addresses_and_paths_are_not_damage():
    assert extraction_damage(URLS) == 0.0


def test_identifiers_and_names_in_prose_are_not_damage():
    assert extraction_damage(IDENTIFIERS_IN_PROSE) == 0.0


def test_a_lower_to_upper_join_alone_is_not_counted():
    # "theFiles" has the shape of "getFiles": counted, every API reference would be damaged.
    assert extraction_damage("Open theFiles panel and read theReadme first.") == 0.0


def test_glued_all_capitals_are_damage():
    assert extraction_damage("THEBACKUPSERVICEKEEPSEVERYCOPY is glued") > 0.5


def test_a_comma_between_lower_case_letters_is_a_glue():
    assert extraction_damage("files,and folders") == pytest.approx(8 / 15)
    assert extraction_damage("files, and folders") == 0.0
    assert extraction_damage("1,000 and 2;3 are numbers") == 0.0


def test_german_compounds_stay_under_the_threshold():
    damage = extraction_damage(GERMAN)
    assert 0.0 < damage < THRESHOLD  # one 34-letter compound among 70 words


def test_scripts_without_spaces_or_case_are_not_measured():
    assert extraction_damage("日本語の文章には空白がありません。これは損傷ではありません。") == 0.0
    assert extraction_damage("ภาษาไทยไม่มีการเว้นวรรคระหว่างคำในประโยคเลยแม้แต่น้อย") == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n\t ",
        "1,000 2.5 3/4 2024-01-01 0x1F 42 3.14159265358979323846264338",
        "-- ... !!! ???",
        "x = foo(bar_baz[0]) + {'a': 1}",
    ],
    ids=["empty", "white-space", "numbers", "punctuation", "only-code"],
)
def test_text_with_nothing_to_measure_is_not_damaged(text):
    assert extraction_damage(text) == 0.0


def test_the_measure_is_deterministic():
    text = "\n".join([CLEAN, GLUED, CODE, URLS, GERMAN])
    assert len({extraction_damage(text) for _ in range(3)}) == 1


def test_not_measured_is_not_damaged():
    assert not extraction_is_damaged(None, threshold=THRESHOLD)
    assert not extraction_is_damaged(THRESHOLD, threshold=THRESHOLD)
    assert extraction_is_damaged(THRESHOLD + 0.01, threshold=THRESHOLD)


@pytest.mark.parametrize(
    ("damages", "expected"),
    [
        ({"primary": 0.0, "secondary": 0.0}, "primary"),
        ({"primary": 0.6, "secondary": 0.01}, "secondary"),
        ({"primary": 0.6, "secondary": 0.5}, "primary"),
        ({"primary": 0.01, "secondary": 0.9}, "primary"),
        ({"primary": 0.6}, "primary"),  # the secondary failed: no clean text to take
        ({"primary": 0.6, "secondary": None}, "secondary"),  # admitted, not measured
        ({"secondary": 0.0}, None),  # no primary: nothing to check a quote against
        ({}, None),
    ],
    ids=[
        "both-clean",
        "primary-damaged",
        "both-damaged",
        "secondary-damaged",
        "secondary-failed",
        "secondary-unmeasured",
        "primary-failed",
        "none",
    ],
)
def test_the_primary_serves_unless_it_is_damaged_and_the_secondary_clean(damages, expected):
    assert serving_role(damages, threshold=THRESHOLD) == expected


@pytest.mark.parametrize("value", ["0", "1", "high"])
def test_a_damage_threshold_outside_zero_to_one_is_refused_at_start(value):
    result = django_setup_with("KOINON_EXTRACTION_DAMAGE_THRESHOLD", value)
    assert result.returncode != 0
    assert "KOINON_EXTRACTION_DAMAGE_THRESHOLD" in result.stderr
