"""Passages of bounded size (knowledge.chunking): a run-on sentence longer than a passage is
cut between words, never inside one, so that every passage's words are words of both
readings of the document and a quote may end where a passage ends."""

import re

from knowledge.chunking import MAX_PASSAGE_CHARS, chunk
from knowledge.extraction import extract
from knowledge.normalise import normalised_key

# A paper's paragraph whose citations ("[10] .") the segmenter does not end a sentence at:
# one "sentence" of about 1,500 characters.
CITED = " ".join(
    f"Transmission in region {n} occurs in a sylvatic cycle between forest-dwelling "
    f"mosquitoes, wild primates, squirrels, birds and rodents [{n}] ."
    for n in range(12)
)
# No sentence mark at all: a cut can only fall between words.
RUN_ON = " ".join(f"w{n:04d}x" for n in range(400))


def _passages(text: str) -> list[str]:
    result = extract("text", text.encode(), role="primary")
    return [result.text[p.char_start : p.char_end] for p in chunk(result.text, result.segments)]


def _words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


def test_a_run_on_sentence_is_cut_after_a_sentence_like_mark():
    passages = _passages(CITED)
    assert len(passages) > 1
    for passage in passages:
        assert len(passage) <= MAX_PASSAGE_CHARS
        assert passage.startswith("Transmission in region")
        assert passage.endswith("] .")


def test_without_a_mark_the_cut_falls_between_words():
    passages = _passages(RUN_ON)
    assert len(passages) > 1
    words = set(_words(RUN_ON))
    for passage in passages:
        assert len(passage) <= MAX_PASSAGE_CHARS
        assert set(_words(passage)) <= words  # no "w01" + "23x" halves
    # Nothing is lost: the passages together hold every word, in order.
    joined = [w for passage in passages for w in _words(passage)]
    assert list(dict.fromkeys(joined)) == _words(RUN_ON)


def test_a_token_longer_than_a_passage_is_still_cut_at_the_limit():
    token = "x" * (2 * MAX_PASSAGE_CHARS + 10)
    passages = _passages(token)
    assert "".join(passages) == token
    assert all(len(p) <= MAX_PASSAGE_CHARS for p in passages)


def test_every_passage_of_a_run_on_paragraph_is_in_the_second_reading():
    """The second quote check: a passage that ended in "squirre" was in no reading."""
    secondary = normalised_key(extract("text", CITED.encode(), role="secondary").text)
    for passage in _passages(CITED):
        assert normalised_key(passage) in secondary
