"""Train the support judge's logistic regression and pick its threshold, reproducibly.

    .venv/bin/python -m tools.judge.fit [--out answers/judge/judge.json] [--cache DIR]

The regression reads the cross-encoder's logit and the lexical features of a pair. It is fitted
on the cross-encoder's dev slice (`tools.judge.pairs`: whole articles of
SQuAD 1.1 train and squad2-dev-train, gold passages of NQ-open's training part, papers of
COVID-QA, manual sections of E-Manual and questions of RAGBench's validation rows, that the
cross-encoder never trained on): every candidate sentence of each dev question's paragraph,
labelled by whether it holds a gold answer, and every sentence of an unanswerable question's
paragraph as a negative. The fit is Newton's method on standardised features with a small L2
penalty: deterministic, no random state.

The thresholds are picked on the same dev slices, Wikipedia's and the other domains'
(papers, manuals, web pages): per question the best-scored sentence is released when it
reaches the threshold; each evidence policy's operating point (OPERATING_RULES) is the lowest
threshold at which the slices' mean wrong rate (answered, no gold answer; each domain counts
the same) stays within its bound with enough of the unanswerable questions abstained from.
The curve of each slice is written beside the weights. NQ-open's held-out questions are
scored at the end and the figures written with the weights (measuring only, never fitted on).
"""

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from answers.judge.features import FEATURE_NAMES, JudgeItem
from answers.judge.lexical import TermWeights, content_stems, content_words, stem
from answers.judge.model import JUDGE_DIR, CrossEncoder, JudgeWeights, LocalJudge
from tools.judge.data import (
    COVIDQA_PATH,
    EMANUAL_PATH,
    NQ_PATH,
    RAGBENCH_TRAIN_PATHS,
    SQUAD2_TRAIN_PATH,
    SQUAD11_PATH,
    contains_answer,
    file_sha256,
    is_heldout,
    passage_sentences,
)
from tools.judge.data import nq_records as read_records
from tools.judge.pairs import (
    DOMAIN_SLICES,
    PairConfig,
    best_per_question,
    make_pairs,
    operating_points,
)

ROOT = JUDGE_DIR.parents[1]
DEFAULT_DATA = NQ_PATH
WIKI_DEV_SLICES = ("dev_squad11", "dev_squad2", "dev_nq")
DEV_SLICES = (*WIKI_DEV_SLICES, *(f"dev_{d}" for d in DOMAIN_SLICES))
MAX_WRONG, MIN_ABSTENTION = 0.08, 0.75  # on the dev slice's squad2 questions
# Each evidence policy's operating point: the lowest threshold at which the dev slices' mean
# wrong rate (Wikipedia's three, papers, manuals, web pages: each slice counts the same) stays
# within `max_wrong` and the unanswerable questions of all slices together are abstained from
# at least `min_abstention`.
# `strict` is the stricter rule, so its threshold is never lower.
OPERATING_RULES = {
    "auto": {"max_wrong": MAX_WRONG, "min_abstention": MIN_ABSTENTION},
    "strict": {"max_wrong": 0.03, "min_abstention": 0.80},
}
THRESHOLDS = [round(0.02 * i, 2) for i in range(10, 48)]  # 0.20 … 0.94
OTHER_PASSAGES = 3
OTHER_SENTENCES = 3
L2 = 1e-3
NEWTON_STEPS = 60


@dataclass(frozen=True)
class Pair:
    question: str
    sentence: str
    context: str  # the passage's title
    label: bool
    group: int  # the question's index: pairs of one question share it
    before: str = ""  # the sentence before it in its passage
    passage: str = ""  # the whole passage it stands in (the paragraph judge reads it)

    @property
    def item(self) -> JudgeItem:
        return JudgeItem(self.question, self.sentence, self.context, self.before, self.passage)


def perturbed(question: str, donor, weights: TermWeights) -> str | None:
    """The question with its rarest content word replaced by the donor question's rarest:
    the same sentence no longer answers it (how SQuAD 2.0 makes most unanswerable
    questions). Deterministic: the donor is chosen by position."""
    words = [w for w in content_words(question) if len(w) > 2]
    donors = [w for w in content_words(donor.question) if len(w) > 2 and w not in words]
    if not words or not donors:
        return None
    rarest = max(words, key=lambda w: (weights.weight(stem(w)), w))
    replacement = max(donors, key=lambda w: (weights.weight(stem(w)), w))
    return re.sub(rf"\b{re.escape(rarest)}\b", replacement, question, count=1, flags=re.I)


def build_pairs(records: list, weights: TermWeights) -> list[Pair]:
    passages = list(dict.fromkeys((r.title, r.text) for r in records))
    stems_of = [set(content_stems(f"{title} {text}")) for title, text in passages]
    index: dict[str, list[int]] = {}
    for number, stems in enumerate(stems_of):
        for stem_ in stems:
            index.setdefault(stem_, []).append(number)
    position = {passage: number for number, passage in enumerate(passages)}
    pairs: list[Pair] = []
    for group, record in enumerate(records):
        question_stems = content_stems(record.question)
        gold = position[(record.title, record.text)]
        overlap: dict[int, float] = {}
        for stem_ in question_stems:
            for number in index.get(stem_, ()):
                if number != gold:
                    overlap[number] = overlap.get(number, 0.0) + weights.weight(stem_)
        others = sorted(overlap, key=lambda n: (-overlap[n], n))[:OTHER_PASSAGES]
        for item in passage_sentences(record.text, title=record.title):
            sentence = item.text
            label = contains_answer(sentence, record.answers)
            pairs.append(
                Pair(
                    record.question, sentence, record.title, label, group, item.before, record.text
                )
            )
            if label:
                swapped = perturbed(
                    record.question, records[(group * 7 + 3) % len(records)], weights
                )
                if swapped:
                    pairs.append(
                        Pair(
                            swapped, sentence, record.title, False, group, item.before, record.text
                        )
                    )
        for number in others:
            title, text = passages[number]
            sentences = [item.text for item in passage_sentences(text, title=title)]
            ranked = sorted(
                sentences,
                key=lambda s: (
                    -sum(weights.weight(x) for x in set(content_stems(s)) & set(question_stems))
                ),
            )[:OTHER_SENTENCES]
            for sentence in ranked:
                label = contains_answer(sentence, record.answers)
                pairs.append(Pair(record.question, sentence, title, label, group, "", text))
    return pairs


def fit_logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.diag([L2 * len(x)] * (z.shape[1] - 1) + [0.0])
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (p - y) + penalty @ beta
        hessian = (z * (p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return mean, scale, beta[:-1], float(beta[-1])


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    positives = labels.astype(bool)
    n_pos, n_neg = positives.sum(), (~positives).sum()
    if not n_pos or not n_neg:
        return float("nan")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate(judge: LocalJudge, pairs: list[Pair], weights: TermWeights) -> dict:
    """Pair AUC and, per question, whether its best-scored sentence holds a gold answer."""
    probabilities = judge.score([p.item for p in pairs], weights)
    scores = np.array(probabilities)
    labels = np.array([p.label for p in pairs], dtype=float)
    best: dict[int, tuple[float, bool]] = {}
    for pair, score in zip(pairs, probabilities, strict=True):
        if pair.group not in best or score > best[pair.group][0]:
            best[pair.group] = (score, pair.label)
    top = [label for _, label in best.values()]
    at_half = [(score >= 0.5, label) for score, label in best.values()]
    return {
        "pairs": len(pairs),
        "questions": len(best),
        "pair_auc": round(auc(scores, labels), 4),
        "top1_contains_answer": round(sum(top) / len(top), 4),
        "supported_at_0.5": round(sum(1 for s, lab in at_half if s and lab) / len(at_half), 4),
        "wrong_at_0.5": round(sum(1 for s, lab in at_half if s and not lab) / len(at_half), 4),
    }


def cross_encoder_spec(name: str = "cross_encoder") -> dict | None:
    """The judge file's entry for a shipped model (`cross_encoder`, `paragraph_encoder`):
    its file, the SHA-256 its manifest pins and its token limit; None when not shipped."""
    manifest = JUDGE_DIR / f"{name}.json"
    if not manifest.exists():
        return None
    meta = json.loads(manifest.read_text())
    return {
        "file": f"{name}.onnx",
        "sha256": meta["sha256"],
        "max_length": int(meta.get("max_length", 128)),
    }


def cached_encoder(spec: dict, cache_dir: Path | None) -> "CachedCrossEncoder":
    model = (JUDGE_DIR / spec["file"]).read_bytes()
    if hashlib.sha256(model).hexdigest() != spec["sha256"]:
        raise SystemExit(f"{spec['file']} does not match its manifest")
    return CachedCrossEncoder(model, spec["max_length"], spec["sha256"], cache_dir)


class CachedCrossEncoder(CrossEncoder):
    """The cross-encoder with its logits kept on disk per model and pair (for iterating on
    the regression's features: the logits do not change with them)."""

    def __init__(self, model: bytes, max_length: int, sha256: str, cache_dir: Path | None):
        super().__init__(model, max_length)
        self.path = cache_dir / f"cross-encoder-logits-{sha256[:16]}.json" if cache_dir else None
        self.cache: dict[str, float] = {}
        if self.path and self.path.exists():
            self.cache = json.loads(self.path.read_text())

    def logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        keys = [f"{q}\x1f{s}" for q, s in pairs]
        missing = [i for i, key in enumerate(keys) if key not in self.cache]
        if missing:
            fresh = super().logits([pairs[i] for i in missing])
            self.cache.update({keys[i]: float(v) for i, v in zip(missing, fresh, strict=True)})
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text(json.dumps(self.cache))
        return np.array([self.cache[key] for key in keys])


def rounded(points: list[dict]) -> list[dict]:
    return [
        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in point.items()}
        for point in points
    ]


def dev_curves(slices: dict[str, list], scores: dict[str, list[float]]) -> dict:
    """The operating points of each dev slice, and of all slices together ("all"): per
    question the best-scored sentence is released when it reaches the threshold."""
    curves, pooled = {}, {}
    for name, pairs in slices.items():
        best = best_per_question(pairs, scores[name])
        curves[name] = rounded(operating_points(best, THRESHOLDS))
        pooled.update(best)
    curves["all"] = rounded(operating_points(pooled, THRESHOLDS))
    return curves


def choose_point(curves: dict[str, list[dict]], rule: dict) -> float:
    """The lowest threshold at which the slices' mean wrong rate (each slice, Wikipedia's
    and each other domain's, counting the same) and the pooled abstention meet `rule`; the
    highest threshold when none does (fail towards abstaining)."""
    slices = [name for name in curves if name != "all"]
    for number, point in enumerate(curves["all"]):
        wrong = sum(curves[name][number]["wrong"] for name in slices) / len(slices)
        if wrong <= rule["max_wrong"] and (point["abstention"] or 0.0) >= rule["min_abstention"]:
            return point["threshold"]
    return curves["all"][-1]["threshold"]


def policy_operating_points(curves: dict[str, list[dict]]) -> dict:
    """{"auto": …, "strict": …}: each policy's threshold, the rule that chose it and the dev
    figures there (pooled, and the worst slice's wrong rate). The running judge reads them
    from the pinned judge file."""
    result = {}
    for mode, rule in OPERATING_RULES.items():
        threshold = choose_point(curves, rule)
        at = {
            name: next(p for p in points if p["threshold"] == threshold)
            for name, points in curves.items()
        }
        worst = max((name for name in at if name != "all"), key=lambda n: at[n]["wrong"])
        result[mode] = {
            "threshold": threshold,
            "rule": rule,
            "dev": at["all"],
            "mean_wrong": round(sum(at[n]["wrong"] for n in at if n != "all") / (len(at) - 1), 4),
            "worst_slice": {"name": worst, "wrong": at[worst]["wrong"]},
        }
    return result


def train(
    data: Path = DEFAULT_DATA,
    cache_dir: Path | None = None,
    *,
    domains: bool = False,
    domain_points: bool = False,
    paragraph: bool = True,
) -> dict:
    """The regression and the operating points. With `domains` (a cross-encoder trained on
    the other domains too) both come from every dev slice; with `domain_points` the
    regression from Wikipedia's three and the points from every dev slice; with neither, as
    for the judge shipped before them, the points from squad2's alone."""
    slices = make_pairs(PairConfig(domains=domains or domain_points))
    fitted_on = DEV_SLICES if domains else WIKI_DEV_SLICES
    calibrated_on = DEV_SLICES if domains or domain_points else ("dev_squad2",)
    scored_on = fitted_on + tuple(name for name in calibrated_on if name not in fitted_on)
    scored_pairs = [
        Pair(p.question, p.sentence, p.context, bool(p.label), p.question_id, p.before, p.passage)
        for name in scored_on
        for p in slices[name]
    ]
    fit_pairs = scored_pairs[: sum(len(slices[name]) for name in fitted_on)]
    weights = TermWeights.from_texts(dict.fromkeys(p.sentence for p in fit_pairs).keys())
    records = list(read_records(data))
    heldout = [r for r in records if is_heldout(r.question)]
    heldout_pairs = build_pairs(heldout, weights)

    spec = cross_encoder_spec()
    paragraph_spec = cross_encoder_spec("paragraph_encoder") if paragraph else None
    features = (
        (("cross_encoder",) if spec else ())
        + (("paragraph",) if paragraph_spec else ())
        + FEATURE_NAMES
    )
    encoder = cached_encoder(spec, cache_dir) if spec else None
    paragraph_judge = cached_encoder(paragraph_spec, cache_dir) if paragraph_spec else None
    n = len(features)
    placeholder = JudgeWeights(
        features,
        np.zeros(n),
        np.ones(n),
        np.zeros(n),
        0.0,
        spec,
        paragraph_encoder=paragraph_spec,
    )
    judge = LocalJudge(placeholder, encoder, paragraph_judge)
    scored = judge.feature_matrix([p.item for p in scored_pairs], weights)
    x = scored[: len(fit_pairs)]
    y = np.array([p.label for p in fit_pairs], dtype=float)
    mean, scale, coef, intercept = fit_logistic(x, y)
    complete = x[:, features.index("complete")] > 0.5
    precision = round(float(y[complete].mean()), 4) if complete.any() else 0.0
    fitted = JudgeWeights(
        features, mean, scale, coef, intercept, spec, precision, paragraph_encoder=paragraph_spec
    )
    judge = LocalJudge(fitted, encoder, paragraph_judge)
    probabilities = judge.probabilities_of(scored).tolist()
    scores, start = {}, 0
    for name in scored_on:
        scores[name] = probabilities[start : start + len(slices[name])]
        start += len(slices[name])
    curves = dev_curves({name: slices[name] for name in calibrated_on}, scores)
    points = policy_operating_points(curves)
    threshold = {"threshold": points["auto"]["threshold"], "points": curves["all"]}
    return {
        "model": {
            "kind": "logistic_regression",
            "features": list(features),
            "mean": mean.round(8).tolist(),
            "scale": scale.round(8).tolist(),
            "coef": coef.round(8).tolist(),
            "intercept": round(intercept, 8),
            "complete_precision": precision,
        },
        "cross_encoder": spec,
        **({"paragraph_encoder": paragraph_spec} if paragraph_spec else {}),
        "training_data_sha256": {
            path.name: file_sha256(path)
            for path in (SQUAD11_PATH, SQUAD2_TRAIN_PATH, data)
            + (
                (COVIDQA_PATH, EMANUAL_PATH, *RAGBENCH_TRAIN_PATHS)
                if domains or domain_points
                else ()
            )
        },
        "command": "python -m tools.judge.fit"
        + (" --domains" if domains else "")
        + (" --domain-points" if domain_points and not domains else "")
        + ("" if paragraph else " --no-paragraph"),
        "fitted_on": list(fitted_on),
        "calibrated_on": list(calibrated_on),
        "split": (
            "fitted on the cross-encoder's dev slice (whole articles and passages it never "
            "trained on); NQ-open held out by tools.judge.data.is_heldout, measured only"
        ),
        "threshold": threshold,
        "operating_points": points,
        "curves": curves,
        "metrics": {
            "train": evaluate(judge, fit_pairs, weights),
            "heldout": evaluate(judge, heldout_pairs, weights),
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=JUDGE_DIR / "judge.json")
    parser.add_argument(
        "--domains",
        action="store_true",
        help="fit and calibrate on every dev slice (a cross-encoder trained beyond Wikipedia)",
    )
    parser.add_argument(
        "--domain-points",
        action="store_true",
        help="fit the regression on Wikipedia's dev slices, choose the operating points on "
        "every dev slice (papers, manuals and web pages too)",
    )
    parser.add_argument(
        "--no-paragraph",
        action="store_true",
        help="leave the paragraph judge out even where it is shipped (to compare)",
    )
    parser.add_argument(
        "--cache", type=Path, default=None, help="keep cross-encoder logits here between runs"
    )
    args = parser.parse_args(argv)
    result = train(
        args.data,
        args.cache,
        domains=args.domains,
        domain_points=args.domain_points,
        paragraph=not args.no_paragraph,
    )
    payload = (json.dumps(result, indent=2, sort_keys=True) + "\n").encode()
    args.out.write_bytes(payload)
    print(json.dumps(result["metrics"], indent=2))
    print(
        f"judge file sha256 (JUDGE_SHA256 in answers/judge/model.py): "
        f"{hashlib.sha256(payload).hexdigest()}"
    )


if __name__ == "__main__":
    sys.exit(main())
