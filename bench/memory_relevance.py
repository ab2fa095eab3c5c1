"""Memory relevance (issue 26): which memory entries may steer which part of a question.

Measured on the hand-labelled pairs of memory/relevance_set.py, with IDF weights over the
set's own texts (each text one document). Printed side by side:
- `old`: the rule before issue 26 — any one shared content stem steers;
- `new`: at least MIN_SHARED_STEMS shared stems carrying at least a threshold of the part's
  IDF weight, for each threshold of --thresholds (the shipped one marked).

Figures: precision and recall of "steers" against the labels, accuracy, and the false
positives named (an entry steering a search it is not about is the failure users saw).

Run: .venv/bin/python bench/memory_relevance.py [--thresholds 0.2,0.3,0.4,0.5,0.6]
Pure Python: no database or services needed.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koinon.settings")

import django

django.setup()

from answers.judge.lexical import content_stems  # noqa: E402
from memory.relevance_set import PAIRS, set_weights  # noqa: E402
from memory.services import MIN_SHARED_STEMS, RELEVANCE_THRESHOLD, memory_relevance  # noqa: E402


def figures(predicted: list[bool]) -> dict:
    labels = [relevant for _, _, relevant in PAIRS]
    tp = sum(p and t for p, t in zip(predicted, labels, strict=True))
    fp = sum(p and not t for p, t in zip(predicted, labels, strict=True))
    fn = sum(t and not p for p, t in zip(predicted, labels, strict=True))
    correct = sum(p == t for p, t in zip(predicted, labels, strict=True))
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "accuracy": correct / len(labels),
        "false": [
            PAIRS[i][:2]
            for i, (p, t) in enumerate(zip(predicted, labels, strict=True))
            if p and not t
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thresholds", default="0.2,0.3,0.4,0.5,0.6,0.7")
    args = parser.parse_args()
    weights = set_weights()
    relevant = sum(r for _, _, r in PAIRS)
    print(f"{len(PAIRS)} labelled pairs ({relevant} about the part, {len(PAIRS) - relevant} not)")
    print(f"{'rule':<28}{'precision':>10}{'recall':>8}{'accuracy':>10}  false positives")
    old = [bool(set(content_stems(part)) & set(content_stems(text))) for part, text, _ in PAIRS]
    rows = [("old: one shared stem", figures(old))]
    scored = [memory_relevance(part, text, weights) for part, text, _ in PAIRS]
    for threshold in (float(t) for t in args.thresholds.split(",")):
        predicted = [len(r.shared) >= MIN_SHARED_STEMS and r.score >= threshold for r in scored]
        mark = " (shipped)" if abs(threshold - RELEVANCE_THRESHOLD) < 1e-9 else ""
        rows.append((f"new: >={MIN_SHARED_STEMS} stems, {threshold:.2f}{mark}", figures(predicted)))
    for name, row in rows:
        print(
            f"{name:<28}{row['precision']:>10.2f}{row['recall']:>8.2f}{row['accuracy']:>10.2f}"
            f"  {len(row['false'])}"
        )
        for part, text in row["false"]:
            print(f"{'':<30}- {part!r} <- {text!r}")


if __name__ == "__main__":
    main()
