"""Evaluate the shipped cross-encoder judge (answers/judge/cross_encoder.onnx).

Runs in the app venv (.venv, Python 3.12) with onnxruntime, tokenizers and numpy only: no
torch. Checks the model's SHA-256 against cross_encoder.json, then reports:

Each pair is (question, `judge_segment(sentence, title, sentence before)`), as the judge reads
it at run time.

(i) NQ-open held-out questions (never trained on): pair AUC over the candidate sentences of
    each gold passage (label: the sentence contains a gold answer), and how often the
    top-scored sentence of the passage contains a gold answer;
(ii) the SQuAD 2.0 dev sample: every candidate sentence of a question's paragraph is scored
    and the best one kept. For a threshold t on P = sigmoid(logit), an answerable question
    is *supported* when max P >= t and the best sentence contains a gold answer, *wrong* when
    max P >= t and it does not (rates over answerable questions); an unanswerable question is
    a *correct abstention* when max P < t;
(iii) inference cost: ms per pair at batch sizes 1, 4 and 16 on one onnxruntime thread.

The figures are written into the manifest's "metrics" (`--no-write` leaves it as it is).
"""

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from answers.judge.segment import judge_segment
from tools.judge.common import (
    MANIFEST_PATH,
    NQ_PATH,
    ONNX_PATH,
    SQUAD_PATH,
    encode_pairs,
    file_sha256,
    load_tokenizer,
    pad_batch,
    roc_auc,
    sigmoid,
)
from tools.judge.data import (
    contains_answer,
    is_heldout,
    nq_records,
    passage_sentences,
)

THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]
MAX_WRONG, MIN_ABSTENTION = 0.10, 0.80


def session(threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(ONNX_PATH), options, providers=["CPUExecutionProvider"])


def score(
    model: ort.InferenceSession, tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]]
) -> np.ndarray:
    """Logits of (question, sentence) pairs, batched by length."""
    encoded = encode_pairs(tokenizer, pairs)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    logits = np.zeros(len(encoded), dtype=np.float32)
    for start in range(0, len(order), 32):
        chunk = order[start : start + 32]
        logits[chunk] = model.run(["logits"], pad_batch([encoded[i] for i in chunk]))[0][:, 0]
    return logits


def evaluate_nq(model: ort.InferenceSession, tokenizer: Tokenizer) -> dict[str, float]:
    pairs: list[tuple[str, str]] = []
    labels: list[int] = []
    groups: list[tuple[int, int]] = []  # (start, end) of each question's sentences
    for record in nq_records(NQ_PATH):
        if not is_heldout(record.question):
            continue
        sentences = passage_sentences(record.text, title=record.title)
        if not sentences:
            continue
        start = len(pairs)
        pairs += [
            (record.question, judge_segment(s.text, record.title, s.before)) for s in sentences
        ]
        labels += [int(contains_answer(s.text, record.answers)) for s in sentences]
        groups.append((start, len(pairs)))
    logits = score(model, tokenizer, pairs)
    y = np.asarray(labels)
    answerable = [(a, b) for a, b in groups if y[a:b].any()]
    top1 = [y[a + int(np.argmax(logits[a:b]))] for a, b in answerable]
    chance = [y[a:b].mean() for a, b in answerable]
    return {
        "questions": len(groups),
        "questions_with_answer_sentence": len(answerable),
        "pairs": len(pairs),
        "positive_pairs": int(y.sum()),
        "pair_auc": roc_auc(logits, labels),
        "top1_contains_answer": float(np.mean(top1)),
        "top1_random_sentence_expected": float(np.mean(chance)),
    }


def evaluate_squad(model: ort.InferenceSession, tokenizer: Tokenizer) -> dict[str, object]:
    data = json.loads(SQUAD_PATH.read_text(encoding="utf-8"))["data"]
    pairs: list[tuple[str, str]] = []
    questions: list[tuple[int, int, bool, bool]] = []  # start, end, impossible, gold in text
    best_sentences: list[list[str]] = []
    answers_of: list[list[str]] = []
    for article in data:
        title = article["title"].replace("_", " ")
        for paragraph in article["paragraphs"]:
            found = passage_sentences(paragraph["context"], title=title)
            sentences = [s.text for s in found]
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                start = len(pairs)
                pairs += [(qa["question"], judge_segment(s.text, title, s.before)) for s in found]
                gold_anywhere = any(contains_answer(s, answers) for s in sentences)
                questions.append((start, len(pairs), bool(qa["is_impossible"]), gold_anywhere))
                best_sentences.append(sentences)
                answers_of.append(answers)
    probabilities = sigmoid(score(model, tokenizer, pairs).astype(np.float64))

    best_p, best_ok, impossible = [], [], []
    for (start, end, is_impossible, _), sentences, answers in zip(
        questions, best_sentences, answers_of, strict=True
    ):
        if start == end:  # a paragraph without candidate sentences: nothing to quote
            best_p.append(0.0)
            best_ok.append(False)
        else:
            argmax = int(np.argmax(probabilities[start:end]))
            best_p.append(float(probabilities[start + argmax]))
            best_ok.append(not is_impossible and contains_answer(sentences[argmax], answers))
        impossible.append(is_impossible)
    best_p_arr = np.asarray(best_p)
    ok = np.asarray(best_ok)
    imp = np.asarray(impossible)
    ans = ~imp

    table = []
    for t in THRESHOLDS:
        answered = best_p_arr >= t
        table.append(
            {
                "t": t,
                "supported": float((answered & ok)[ans].mean()),
                "wrong": float((answered & ~ok)[ans].mean()),
                "answerable_abstained": float((~answered)[ans].mean()),
                "abstention": float((~answered)[imp].mean()),
            }
        )
    meeting = [r for r in table if r["wrong"] <= MAX_WRONG and r["abstention"] >= MIN_ABSTENTION]
    chosen = max(meeting, key=lambda r: (r["supported"], -r["t"])) if meeting else None
    return {
        "questions": len(questions),
        "answerable": int(ans.sum()),
        "impossible": int(imp.sum()),
        "answerable_with_gold_in_a_sentence": int(sum(q[3] for q in questions if not q[2])),
        "pairs": len(pairs),
        "top1_contains_answer_answerable": float(ok[ans].mean()),
        "answerable_vs_impossible_auc_of_max_p": roc_auc(best_p_arr, ans.astype(int)),
        "thresholds": table,
        "criterion": f"wrong <= {MAX_WRONG:.2f} and abstention >= {MIN_ABSTENTION:.2f}",
        "chosen_threshold": chosen,
    }


def inference_cost(
    tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]]
) -> dict[str, dict[str, float]]:
    """ms per pair on one thread, for real pairs padded per batch and padded to 128 tokens."""
    model = session(threads=1)
    encoded = encode_pairs(tokenizer, pairs)
    result: dict[str, dict[str, float]] = {}
    for batch in (1, 4, 16):
        chunks = [encoded[i : i + batch] for i in range(0, len(encoded), batch)]
        chunks = [c for c in chunks if len(c) == batch]
        model.run(["logits"], pad_batch(chunks[0]))  # warm-up
        timings: dict[str, float] = {}
        for label, fixed in (("dynamic_padding", False), ("padded_to_128", True)):
            started = time.perf_counter()
            for chunk in chunks:
                inputs = pad_batch(chunk, width=128 if fixed else None)
                model.run(["logits"], inputs)
            elapsed = time.perf_counter() - started
            timings[label] = 1000 * elapsed / (len(chunks) * batch)
        result[f"batch_{batch}"] = timings
    lengths = [len(ids) for ids, _ in encoded]
    result["sample"] = {"pairs": len(encoded), "mean_tokens": float(np.mean(lengths))}
    return result


def print_report(metrics: dict[str, object]) -> None:
    nq, squad, cost = metrics["nq_heldout"], metrics["squad2_sample"], metrics["inference_ms"]
    print("== NQ-open held-out (gold passages)")
    for key, value in nq.items():
        print(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    print("== SQuAD 2.0 dev sample (best sentence of the paragraph)")
    for key, value in squad.items():
        if key in ("thresholds", "chosen_threshold"):
            continue
        print(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    print("     t  supported  wrong  answerable-abstained  impossible-abstention")
    for row in squad["thresholds"]:
        print(
            f"  {row['t']:4.2f}  {row['supported']:9.3f}  {row['wrong']:5.3f}  "
            f"{row['answerable_abstained']:20.3f}  {row['abstention']:21.3f}"
        )
    chosen = squad["chosen_threshold"]
    if chosen:
        print(
            f"  threshold meeting {squad['criterion']} with the best supported rate: "
            f"t = {chosen['t']:.2f} (supported {chosen['supported']:.3f}, wrong "
            f"{chosen['wrong']:.3f}, abstention {chosen['abstention']:.3f})"
        )
    else:
        print(f"  no threshold meets {squad['criterion']}")
    print("== inference, onnxruntime, 1 thread, ms per pair")
    for key, value in cost.items():
        print(f"  {key}: " + ", ".join(f"{k} {v:.2f}" for k, v in value.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true", help="do not update the manifest")
    args = parser.parse_args()
    manifest = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    digest = file_sha256(ONNX_PATH)
    if digest != manifest["sha256"]:
        raise SystemExit(f"{ONNX_PATH.name} sha256 {digest} != manifest {manifest['sha256']}")
    print(f"{ONNX_PATH.name}: sha256 {digest} matches {MANIFEST_PATH.name}")
    tokenizer = load_tokenizer()
    model = session(threads=2)
    started = time.perf_counter()
    nq = evaluate_nq(model, tokenizer)
    squad = evaluate_squad(model, tokenizer)
    data = json.loads(SQUAD_PATH.read_text(encoding="utf-8"))["data"]
    # Timing sample: real SQuAD pairs, one question per paragraph with each of its sentences.
    sample = [
        (paragraph["qas"][0]["question"], judge_segment(s.text, article["title"], s.before))
        for article in data
        for paragraph in article["paragraphs"]
        for s in passage_sentences(paragraph["context"])
    ][:256]
    metrics = {
        "nq_heldout": nq,
        "squad2_sample": squad,
        "inference_ms": inference_cost(tokenizer, sample),
        "evaluation_seconds": time.perf_counter() - started,
    }
    print_report(metrics)
    if not args.no_write:
        manifest["metrics"] = metrics
        MANIFEST_PATH.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        print(f"metrics written to {MANIFEST_PATH.name}")


if __name__ == "__main__":
    main()
