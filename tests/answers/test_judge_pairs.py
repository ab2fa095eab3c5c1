"""The judge's training pairs beyond Wikipedia (issue 47, item 3): papers with answer strings,
manual sections without, RAGBench's sentence labels; and the splits that keep dev and
measuring data apart. Built from small in-memory records, plus one pass over the shared files."""

import os
import subprocess

import pytest

from tools.judge import data
from tools.judge.common import REPO_ROOT
from tools.judge.data import ParagraphRecord, RagbenchRecord
from tools.judge.pairs import (
    DOMAIN_SLICES,
    PairConfig,
    domain_pairs,
    holds_answer,
    paragraph_pairs,
    ragbench_pairs,
)

GOLD = (
    "Samples were stored at four degrees. The virus binds the ACE2 receptor on host cells. "
    "Binding was measured twice."
)
OTHER = "The ACE2 receptor is found in many tissues. Host cells were grown in flasks."


def test_a_paper_question_labels_the_sentence_holding_its_answer_and_negatives_around_it():
    records = [
        ParagraphRecord("Which receptor does the virus bind?", GOLD, 1, ("ACE2 receptor",), "p1"),
        ParagraphRecord("Which receptor does the virus bind?", OTHER, 0, (), "p1"),
    ]
    pairs = paragraph_pairs(
        records, source="covidqa", config=PairConfig(), every_sentence=False, first_id=7
    )
    positives = [p.sentence for p in pairs if p.label == 1]
    assert positives == ["The virus binds the ACE2 receptor on host cells."]
    kinds = {(p.sentence, p.kind) for p in pairs if p.label == 0}
    assert ("Binding was measured twice.", "passage") in kinds
    # The other paragraph's sentence naming "the ACE2 receptor" holds the gold answer string:
    # such a sentence is never made a negative.
    assert all("ACE2 receptor" not in p.sentence for p in pairs if p.label == 0)
    assert {p.question_id for p in pairs} == {7}
    assert {p.source for p in pairs} == {"covidqa"}


def test_a_long_gold_answer_makes_each_of_its_sentences_positive():
    answer = "The virus binds the ACE2 receptor on host cells. Binding was measured twice."
    assert holds_answer("Binding was measured twice on each plate.", (answer,)) is False
    assert holds_answer("The virus binds the ACE2 receptor on host cells.", (answer,))
    assert holds_answer("Binding twice.", (answer,)) is False  # too short to stand for it


def test_a_manual_question_without_answer_strings_uses_its_section_only_when_it_matches():
    section = (
        "You can view a list of notifications for all events on your TV. "
        "Press the Home button to open Smart Hub."
    )
    other = "Connect the remote to the TV. The list of apps is sorted by use."
    records = [
        ParagraphRecord("Where can I view the list of notifications?", section, 1, (), "s1"),
        ParagraphRecord("Where can I view the list of notifications?", other, 0, (), "s2"),
        ParagraphRecord("How do I calibrate the colour?", section, 1, (), "s1"),
    ]
    pairs = paragraph_pairs(
        records, source="emanual", config=PairConfig(), every_sentence=False, first_id=0
    )
    best = [p for p in pairs if p.kind == "section_best"]
    # The first question shares its rare words with a sentence of its section; the second
    # shares none, so no sentence is labelled for it.
    assert [(p.question, p.sentence) for p in best] == [
        (
            "Where can I view the list of notifications?",
            "You can view a list of notifications for all events on your TV.",
        )
    ]
    assert {p.sentence for p in pairs if p.kind == "other_paragraph"} <= set(
        s.text for s in data.passage_sentences(other)
    )
    dev = paragraph_pairs(
        records[:2], source="emanual", config=PairConfig(), every_sentence=True, first_id=0
    )
    # In the dev slice a sentence is right when it stands in the answering section.
    assert {(p.label, p.kind) for p in dev} == {(1, "dev_section"), (0, "dev")}
    assert sum(p.label for p in dev) == 2


def test_ragbench_pairs_use_utilized_sentences_and_leave_relevant_unused_ones_out():
    sentences = (
        ("0a", "The bridge opened in 1932."),
        ("0b", "It carries eight lanes of traffic."),
        ("0c", "Its designer was John Bradfield."),
        ("1a", "Ferries crossed the harbour before it."),
        ("1b", "Tolls are charged southbound."),
    )
    record = RagbenchRecord(
        "Who designed the bridge?",
        sentences,
        relevant=frozenset({"0c", "0a"}),
        utilized=frozenset({"0c"}),
        subset="hagrid",
    )
    pairs = ragbench_pairs([record], config=PairConfig(), every_sentence=False, first_id=3)
    assert [(p.sentence, p.label) for p in pairs if p.label] == [
        ("Its designer was John Bradfield.", 1)
    ]
    assert all(p.sentence != "The bridge opened in 1932." for p in pairs)  # relevant, unused
    positive = next(p for p in pairs if p.label)
    assert positive.before == "It carries eight lanes of traffic."  # same document
    first_of_next = ragbench_pairs([record], config=PairConfig(), every_sentence=True, first_id=3)
    assert next(p for p in first_of_next if p.sentence.startswith("Ferries")).before == ""

    unanswerable = RagbenchRecord(
        "Who designed the bridge?", sentences, frozenset(), frozenset(), "hagrid"
    )
    dev = ragbench_pairs([unanswerable], config=PairConfig(), every_sentence=True, first_id=0)
    assert {p.kind for p in dev} == {"impossible"} and not any(p.label for p in dev)


def test_the_domain_slices_split_whole_papers_sections_and_questions_and_never_read_test_files():
    slices = domain_pairs(PairConfig(), first_id=0)
    assert set(slices) == {*DOMAIN_SLICES, *(f"dev_{name}" for name in DOMAIN_SLICES)}
    for name in DOMAIN_SLICES:
        fit, dev = slices[name], slices[f"dev_{name}"]
        assert fit and dev, name
        assert not {p.group for p in fit} & {p.group for p in dev}, name
        assert not {p.question_id for p in fit} & {p.question_id for p in dev}, name
        assert any(p.label for p in dev), name
    assert {p.source for p in slices["ragbench"]} == {
        "ragbench-expertqa",
        "ragbench-hagrid",
        "ragbench-hotpotqa",
    }
    read = {path.name for path in data.training_files()}
    assert not any("test" in name or "policyqa" in name for name in read)
    assert {p.name for p in data.RAGBENCH_TRAIN_PATHS} <= read


@pytest.mark.slow  # the training venv's Python: `make test` installs it, test-fast does not
def test_the_pairs_do_not_depend_on_the_process_string_hashing():
    """Every process hashes strings with its own seed, and so orders sets its own way: the
    pairs (and so the model) must not follow. A float sum over a set's words once broke ties
    between negatives one way in one process and another way in the next, so a resumed run
    and a whole one, or CI and the machine that recorded the quick check, trained on
    different pairs. Run by the training venv's Python 3.11, whose `sum` of floats is the
    plain one (3.12's compensated `sum` hid the bug)."""
    python = REPO_ROOT / ".venv-train" / "bin" / "python"
    assert python.exists(), "the training venv is missing: `make test` installs it"
    script = (
        "from tools.judge.pairs import PairConfig, make_pairs, pairs_digest;"
        "print(pairs_digest(make_pairs(PairConfig(domains=True))))"
    )
    runs = [
        subprocess.Popen(
            [python, "-c", script],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            stdout=subprocess.PIPE,
            text=True,
        )
        for seed in ("1", "2")
    ]
    digests = [run.communicate(timeout=600)[0].strip() for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert len(digests[0]) == 64
    assert digests[0] == digests[1]


def test_the_paragraph_judges_pairs_read_whole_passages_labelled_by_whether_they_answer():
    """tools/judge/paragraph.py: a squad2 question's own paragraph is labelled by whether
    it is answerable there; a RAGBench document holding a used sentence answers, one with
    no relevant sentence does not, and one relevant but unused is left out."""
    from tools.judge.data import QARecord
    from tools.judge.paragraph import ragbench_paragraph_pairs, squad_paragraph_pairs

    text = "The dam was finished in 1936. It holds the lake."
    other = "The lake draws visitors. Boats leave from the dam at nine."
    records = [
        QARecord("When was the dam finished?", ("1936",), "Dam", text, "Dam", False),
        QARecord("When was the dam painted?", (), "Dam", text, "Dam", True),
        QARecord("When do boats leave?", ("nine",), "Dam", other, "Dam", False),
    ]
    pairs = squad_paragraph_pairs(records, source="squad2", negatives=True, first_id=0)
    own = [(p.question, p.label) for p in pairs if p.kind == "own"]
    assert own == [
        ("When was the dam finished?", 1),
        ("When was the dam painted?", 0),
        ("When do boats leave?", 1),
    ]
    assert all(p.sentence in (text, other) for p in pairs)
    negatives = [p for p in pairs if p.kind == "other"]
    assert {(p.question, p.sentence, p.label) for p in negatives} == {
        ("When was the dam finished?", other, 0),
        ("When was the dam painted?", other, 0),
        ("When do boats leave?", text, 0),
    }
    row = RagbenchRecord(
        "Who built the dam?",
        (
            ("0a", "The dam was built by Six Companies."),
            ("0b", "It is tall."),
            ("1a", "The lake is blue."),
            ("2a", "Dams hold water."),
        ),
        frozenset({"0a", "2a"}),
        frozenset({"0a"}),
        "hagrid",
    )
    documents = ragbench_paragraph_pairs([row], first_id=0)
    assert [(p.sentence, p.label) for p in documents] == [
        ("The dam was built by Six Companies. It is tall.", 1),
        ("The lake is blue.", 0),
    ]
