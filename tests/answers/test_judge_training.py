"""The shipped judge is what its training command makes from the shared data, its files
are the pinned ones, and it runs without torch."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from answers.judge import model as judge_model
from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.judge.segment import judge_segment
from answers.pipeline.judgement import policy_floor
from tests.guards import no_hang
from tools.judge import data, fit
from tools.judge.common import BUILD_DIR, MANIFEST_PATH, REPO_ROOT
from tools.judge.data import NQ_PATH, SQUAD2_TRAIN_PATH, SQUAD11_PATH, file_sha256, training_files
from tools.judge.fit import DEFAULT_DATA, train

TOLERANCE = 0.005  # on every reported rate and AUC
QUICK_TOLERANCE = 0.02  # a retrained slice: float sums may differ across processors


def data_hashes(paths=(SQUAD11_PATH, SQUAD2_TRAIN_PATH, NQ_PATH)) -> dict[str, str]:
    """The pinned training data: by default the regression's (SQuAD 1.1 train,
    squad2-dev-train, NQ-open)."""
    for path in paths:
        if not path.exists():
            pytest.fail(f"the shared training data is missing: {path.name}")
    return {path.name: file_sha256(path) for path in paths}


@pytest.fixture(scope="module")
def nq_data():
    if not DEFAULT_DATA.exists():
        pytest.fail(f"the shared NQ-open file is missing: {DEFAULT_DATA.name}")
    return DEFAULT_DATA


def test_the_shipped_judge_file_is_the_pinned_one():
    data = judge_model.JUDGE_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == judge_model.JUDGE_SHA256
    weights = judge_model.weights_load()
    if weights.cross_encoder:
        encoder = judge_model.JUDGE_DIR / weights.cross_encoder["file"]
        assert hashlib.sha256(encoder.read_bytes()).hexdigest() == weights.cross_encoder["sha256"]


@pytest.mark.slow
def test_retraining_from_the_shared_data_reproduces_the_shipped_judge(nq_data):
    shipped = json.loads(judge_model.JUDGE_FILE.read_text())
    # Fitted as its own command says: on Wikipedia's dev slices, or (`--domains`) on every
    # dev slice, papers, manuals and web pages too; its operating points chosen across every
    # dev slice with either `--domains` or `--domain-points`.
    command = shipped["command"].split()
    domains = "--domains" in command
    domain_points = "--domain-points" in command
    paths = (SQUAD11_PATH, SQUAD2_TRAIN_PATH, NQ_PATH)
    if domains or domain_points:
        paths += (data.COVIDQA_PATH, data.EMANUAL_PATH, *data.RAGBENCH_TRAIN_PATHS)
    assert shipped["training_data_sha256"] == data_hashes(paths)
    retrained = train(nq_data, domains=domains, domain_points=domain_points)
    assert retrained["threshold"] == shipped["threshold"]
    assert retrained["operating_points"] == shipped["operating_points"]
    assert retrained["calibrated_on"] == shipped["calibrated_on"]
    for part in ("train", "heldout"):
        for name, value in shipped["metrics"][part].items():
            assert retrained["metrics"][part][name] == pytest.approx(value, abs=TOLERANCE), (
                part,
                name,
            )
    assert retrained["model"]["features"] == shipped["model"]["features"]
    assert retrained["model"]["coef"] == pytest.approx(shipped["model"]["coef"], abs=1e-3)
    # The held-out part is never trained on: it is as large as the split says.
    assert shipped["metrics"]["heldout"]["questions"] == 509


def test_the_judge_scores_without_torch():
    judge_model._loaded.clear()
    judge = judge_model.local_judge()
    [answers, misses] = judge.score(
        [
            JudgeItem(
                "Who owns service reviews?", "The platform operations team owns service reviews."
            ),
            JudgeItem("Who owns service reviews?", "Each review covers open risks."),
        ],
        TermWeights.uniform(),
    )
    assert 0.0 <= misses < answers <= 1.0
    assert "torch" not in sys.modules


@pytest.mark.slow
def test_the_shipped_cross_encoder_reproduces_its_recorded_evaluation(nq_data):
    """CI checks the cross-encoder's hash and evaluation, not its training (which needs
    torch and about 20 minutes: `make train-judge`)."""
    from tools.judge import evaluate
    from tools.judge.common import ONNX_PATH, load_tokenizer

    manifest = json.loads(MANIFEST_PATH.read_text())
    assert hashlib.sha256(ONNX_PATH.read_bytes()).hexdigest() == manifest["sha256"]
    # Every file the shipped model was trained on is, byte for byte, one the training reads.
    assert manifest["training_data_sha256"].items() <= data_hashes(training_files()).items()
    measured = evaluate.evaluate_nq(evaluate.session(1), load_tokenizer())
    recorded = manifest["metrics"]["nq_heldout"]
    assert measured["questions"] == recorded["questions"] == 509
    for name in ("pair_auc", "top1_contains_answer"):
        assert measured[name] == pytest.approx(recorded[name], abs=TOLERANCE), name


def test_the_threshold_default_is_the_one_the_dev_slice_chose(settings):
    """The running judge's auto point is what `python -m tools.judge.fit` picked on the dev
    slice (never on an eval part), strict's is its stricter rule's pick, both as recorded
    with the curve they were chosen from; no operator minimum raises them in the tests."""
    shipped = json.loads(judge_model.JUDGE_FILE.read_text())
    assert "KOINON_JUDGE_THRESHOLD" not in os.environ
    assert settings.KOINON_JUDGE_THRESHOLD is None
    assert fit.policy_operating_points(shipped["curves"]) == shipped["operating_points"]
    assert shipped["threshold"]["points"] == shipped["curves"]["all"]
    # Chosen on dev slices (Wikipedia's, and the other domains' once the cross-encoder is
    # trained on them: `fit --domains`), never on an eval part.
    assert set(shipped["calibrated_on"]) <= set(fit.DEV_SLICES)
    assert set(shipped["curves"]) == {*shipped["calibrated_on"], "all"}
    points = judge_model.weights_load().operating_points
    assert points is not None
    assert shipped["threshold"]["threshold"] == points.auto == policy_floor("auto")
    assert points.strict == policy_floor("strict") > points.auto


@pytest.mark.slow
def test_retraining_a_small_fixed_slice_reproduces_its_recorded_metrics(tmp_path):
    """The cross-encoder's training itself, on a small fixed slice of the same data (CPU
    torch in the training venv, which `make test` installs): the same pairs, and dev figures
    within QUICK_TOLERANCE of those recorded when the shipped model was trained."""
    recorded = json.loads(MANIFEST_PATH.read_text())["quick_check"]
    assert recorded["training_data_sha256"] == data_hashes(training_files())
    report = tmp_path / "report.json"
    shutil.rmtree(BUILD_DIR / "ci-quick", ignore_errors=True)  # train afresh, never resume
    result = train_command([*recorded["command"].split(), "--tag", "ci-quick", "--report", report])
    assert result.returncode == 0, result.stderr[-3000:]
    measured = json.loads(report.read_text())
    assert measured["pairs"] == recorded["pairs"]
    assert measured["pairs_sha256"] == recorded["pairs_sha256"], "other pairs than recorded"
    assert measured["config"] == recorded["config"]
    for mine, theirs in zip(measured["dev_history"], recorded["dev_history"], strict=True):
        for name, value in theirs.items():
            assert mine[name] == pytest.approx(value, abs=QUICK_TOLERANCE), name


def train_command(args: list) -> subprocess.CompletedProcess:
    python = REPO_ROOT / ".venv-train" / "bin" / "python"
    if not python.exists():
        pytest.fail("the training venv is missing: `make test` installs it (.venv-train)")
    return subprocess.run(
        [str(python), *map(str, args)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


@pytest.mark.slow
def test_an_interrupted_training_run_resumes_where_it_stopped_to_the_same_model(tmp_path):
    """A run stopped after a checkpoint (a session's end, a closed laptop) and started again
    resumes there, and ends where an uninterrupted run ends."""
    command = ["tools/judge/train_cross_encoder.py", "--quick", "40", "--no-ship"]
    command += ["--checkpoint-steps", "3"]
    for tag in ("ci-resumed", "ci-whole"):
        shutil.rmtree(BUILD_DIR / tag, ignore_errors=True)
    stopped = train_command([*command, "--tag", "ci-resumed", "--stop-after", "3"])
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert "stage 1: stopped after step 3" in stopped.stdout
    assert not (BUILD_DIR / "ci-resumed" / "stage1.pt").exists()
    resumed = train_command([*command, "--tag", "ci-resumed", "--report", tmp_path / "r.json"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "stage 1: resumed at step 3" in resumed.stdout
    whole = train_command([*command, "--tag", "ci-whole", "--report", tmp_path / "w.json"])
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "resumed" not in whole.stdout
    resumed_report, whole_report = (
        json.loads((tmp_path / n).read_text()) for n in ("r.json", "w.json")
    )
    assert resumed_report["pairs_sha256"] == whole_report["pairs_sha256"]
    mine, theirs = resumed_report["dev_history"], whole_report["dev_history"]
    assert len(mine) == len(theirs) == 2
    for after_resume, uninterrupted in zip(mine, theirs, strict=True):
        assert after_resume == pytest.approx(uninterrupted, abs=1e-4)


def test_a_pairs_score_does_not_depend_on_what_is_judged_with_it():
    """The int8 cross-encoder quantises activations over its whole input: each pair runs on
    its own, so a quote scores the same alone and among others (it moved by up to 1.1 logits
    when batched)."""
    judge = judge_model.local_judge()
    question = "When does the harbour gate close?"
    sentences = [
        "The harbour gate opens at dawn every day of the year. It closes two hours before low "
        "tide.",
        "Pilots may request a late passage by radio.",
        "Berth changes for vessels over forty metres are approved by the harbour master, who "
        "keeps the register of every vessel that has moored in the harbour since it opened.",
        "Fuel deliveries are scheduled.",
    ]
    pairs = [(question, sentence) for sentence in sentences]
    alone = [judge.cross_encoder.logits([pair])[0] for pair in pairs]
    assert judge.cross_encoder.pool is not None  # KOINON_JUDGE_THREADS is 2 by default
    together = judge.cross_encoder.logits(pairs)
    assert list(together) == alone
    # Side by side on the judge's threads or one after another: the same logits, in order.
    pool, judge.cross_encoder.pool = judge.cross_encoder.pool, None
    try:
        assert list(judge.cross_encoder.logits(pairs)) == alone
    finally:
        judge.cross_encoder.pool = pool
    items = [JudgeItem(question, sentence) for sentence in sentences]
    assert (
        judge.score(items, TermWeights.uniform())[0]
        == judge.score(items[:1], TermWeights.uniform())[0]
    )


# Forking a process whose judge threads run is the case under test.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_process_loads_a_judge_of_its_own():
    """The parent's judge threads do not survive a fork: a child that judged with the
    parent's pool would wait for ever. The child loads its own judge and scores alike."""
    judge = judge_model.local_judge()
    pairs = [("When does the gate close?", "It closes at dusk."), ("Who?", "Nobody knows.")]
    expected = list(judge.cross_encoder.logits(pairs))
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            mine = judge_model.local_judge()
            same = mine is not judge and list(mine.cross_encoder.logits(pairs)) == expected
            os.write(write, b"1" if same else b"0")
        finally:
            os._exit(0)
    os.close(write)
    try:
        with no_hang(60):
            answer = os.read(read, 1)
    finally:
        if not os.waitpid(child, os.WNOHANG)[0]:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        os.close(read)
    assert answer == b"1"


def test_a_paragraph_judge_scores_each_distinct_passage_once_beside_the_sentence():
    """Where the judge file names a paragraph judge, its logit of (part, whole passage) is
    the regression's second column, computed once per distinct pair; a quote whose passage
    is not known is read alone. The shipped cross-encoder stands in for the model here (no
    paragraph judge is shipped: docs/decisions.md)."""
    shipped = judge_model.weights_load()
    spec = shipped.cross_encoder
    assert spec is not None
    model = (judge_model.JUDGE_DIR / spec["file"]).read_bytes()
    seen: list[list[tuple[str, str]]] = []

    class Recording(judge_model.CrossEncoder):
        def logits(self, pairs):
            seen.append(list(pairs))
            return super().logits(pairs)

    features = ("cross_encoder", "paragraph", *shipped.features[1:])
    n = len(features)
    coef = np.zeros(n)
    coef[1] = 1.0  # the probability is sigmoid(paragraph logit) alone
    weights = judge_model.JudgeWeights(
        features, np.zeros(n), np.ones(n), coef, 0.0, spec, paragraph_encoder=dict(spec)
    )
    judge = judge_model.LocalJudge(
        weights, judge_model.CrossEncoder(model, 128), Recording(model, 256)
    )
    question = "Who owns service reviews?"
    answering = "Service reviews are owned by the platform team. They meet monthly."
    other = "The cafeteria opens at noon. It closes at three."
    items = [
        JudgeItem(question, "Service reviews are owned by the platform team.", "", "", answering),
        JudgeItem(question, "They meet monthly.", "", "", answering),
        JudgeItem(question, "The cafeteria opens at noon.", "", "", other),
        JudgeItem(question, "Service reviews are owned by the platform team."),
    ]
    matrix = judge.feature_matrix(items, TermWeights.uniform())
    assert seen == [
        [
            (question, judge_segment(answering)),
            (question, judge_segment(other)),
            (question, judge_segment("Service reviews are owned by the platform team.")),
        ]
    ]
    paragraph = matrix[:, 1]
    assert paragraph[0] == paragraph[1] != paragraph[2]
    assert paragraph[0] > paragraph[2]
    scores = judge.probabilities_of(matrix)
    assert scores[0] == scores[1] > scores[2]
