"""The local support judge: a logistic regression over the pair features and, when the
judge file names one, the logit of a fine-tuned MiniLM cross-encoder (question and sentence
read together). Both files are checked against pinned SHA-256 values at load; a missing,
changed or unreadable file is `JudgeUnavailable`, which the pipeline turns into an
abstention (`judge_unavailable`), never into an unjudged answer.

No torch at run time: the cross-encoder runs on ONNX Runtime, the regression in numpy.
"""

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from django.conf import settings

from answers.judge.features import FEATURE_NAMES, JudgeItem, PairFeatures

if TYPE_CHECKING:
    from tokenizers import Encoding
from answers.judge.lexical import TermWeights
from answers.judge.segment import judge_segment
from knowledge.embeddings import (
    TOKENIZER_FILE,
    TOKENIZER_PACKAGE,
    TOKENIZER_SHA256,
    pinned_package_file,
)

logger = logging.getLogger(__name__)

JUDGE_DIR = Path(__file__).resolve().parent
JUDGE_FILE = JUDGE_DIR / "judge.json"
# Pinned: retraining (python -m tools.judge.fit) prints the new value to put here.
JUDGE_SHA256 = "725b2329197c0476353270ffe7fcf63b52b1aec2937b3a0bf1cf60c223240256"


class JudgeUnavailable(Exception):
    """The judge cannot be loaded; the message is safe to log (no paths, no file text)."""


def judge_threads() -> int:
    """How many pairs run at once: the setting KOINON_JUDGE_THREADS (checked at start), or 2
    where no Django settings are configured (the training tools)."""
    return int(getattr(settings, "KOINON_JUDGE_THREADS", 2)) if settings.configured else 2


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


class CrossEncoder:
    """The int8 ONNX pair classifier; its tokenizer is the embedding model's (same vocab)."""

    def __init__(self, model_bytes: bytes, max_length: int) -> None:
        import onnxruntime as ort  # heavy, and only where a judge is loaded
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            model_bytes, options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_str(
            pinned_package_file(TOKENIZER_PACKAGE, TOKENIZER_FILE, TOKENIZER_SHA256).decode()
        )
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        self.tokenizer = tokenizer
        threads = judge_threads()
        self.pool = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="judge")
            if threads > 1
            else None
        )

    def logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """One logit per pair, in order, each pair run on its own. The int8 model quantises
        its activations with one scale per tensor, computed over the whole batch: batched
        with other pairs, a pair's logit moved by up to 1.1 (measured), so the score of a
        quote depended on what else was judged with it. Alone it is always the same. Pairs
        run side by side on `judge_threads()` threads (ONNX Runtime releases the GIL; a
        session may run from several threads), each with one thread inside the model."""
        encoded = self.tokenizer.encode_batch(pairs)
        if len(encoded) > 1 and self.pool is not None:
            return np.asarray(list(self.pool.map(self._logit, encoded)), dtype=np.float64)
        return np.asarray([self._logit(item) for item in encoded], dtype=np.float64)

    def _logit(self, item: "Encoding") -> float:
        feeds = {
            "input_ids": np.asarray([item.ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(item.ids)), dtype=np.int64),
            "token_type_ids": np.asarray([item.type_ids], dtype=np.int64),
        }
        (logits,) = self.session.run(["logits"], feeds)
        return float(logits.reshape(-1)[0])


@dataclass(frozen=True)
class OperatingPoints:
    """The threshold each evidence policy judges at, chosen by `tools.judge.fit` on the dev
    slice (`policy_operating_points`) and pinned with the weights: strict is never below
    auto."""

    auto: float
    strict: float

    def of(self, mode: str) -> float:
        """The point of a policy mode: strict's for `strict`, auto's for every other."""
        return self.strict if mode == "strict" else self.auto


@dataclass(frozen=True)
class JudgeWeights:
    features: tuple[str, ...]  # FEATURE_NAMES, with "cross_encoder" first when used
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    cross_encoder: dict | None  # {"file", "sha256", "max_length"}
    # The measured precision of the "complete" rule (every stem of the part in the sentence
    # itself, plus more of the asked type): a pair it holds for scores at least this.
    complete_precision: float = 0.0
    # None only for a judge being fitted (tools.judge.fit); weights_load requires them.
    operating_points: OperatingPoints | None = None
    # The paragraph judge ({"file", "sha256", "max_length"}), when the features name it.
    paragraph_encoder: dict | None = None


def _point(raw: object) -> float:
    """One policy's pinned threshold: a number strictly between 0 and 1 (else ValueError)."""
    value = raw["threshold"] if isinstance(raw, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < value < 1.0:
        raise ValueError("an operating point is not a probability")
    return float(value)


def operating_points_parse(raw: object) -> OperatingPoints:
    """The judge file's `operating_points` (auto and strict), or ValueError when either is
    missing or not a probability, or strict is below auto."""
    if not isinstance(raw, dict):
        raise ValueError("no operating points")
    points = OperatingPoints(auto=_point(raw.get("auto")), strict=_point(raw.get("strict")))
    if points.strict < points.auto:
        raise ValueError("the strict operating point is below the auto one")
    return points


def _read_checked(path: Path, sha256: str, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError:
        logger.error("the %s file is missing", what)
        raise JudgeUnavailable(f"The {what} file is missing.") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        logger.error("the %s file fails its pinned sha256", what)
        raise JudgeUnavailable(f"The {what} file failed its integrity check.")
    return data


def weights_load(path: Path = JUDGE_FILE, sha256: str = JUDGE_SHA256) -> JudgeWeights:
    """The pinned judge file's weights and operating points. JudgeUnavailable for a file
    that is missing, fails its pinned SHA-256, or holds no valid weights or operating
    points (auto and strict, each strictly between 0 and 1, strict not below auto)."""
    data = _read_checked(path, sha256, "judge")
    try:
        raw = json.loads(data)
        model = raw["model"]
        weights = JudgeWeights(
            features=tuple(model["features"]),
            mean=np.array(model["mean"], dtype=np.float64),
            scale=np.array(model["scale"], dtype=np.float64),
            coef=np.array(model["coef"], dtype=np.float64),
            intercept=float(model["intercept"]),
            cross_encoder=raw.get("cross_encoder"),
            complete_precision=float(model.get("complete_precision", 0.0)),
            paragraph_encoder=raw.get("paragraph_encoder"),
        )
    except (ValueError, KeyError, TypeError):
        raise JudgeUnavailable("The judge file is not a judge.") from None
    try:
        points = operating_points_parse(raw.get("operating_points"))
    except ValueError:
        logger.error("the judge file's operating points are missing or inconsistent")
        raise JudgeUnavailable("The judge file has no valid operating points.") from None
    weights = replace(weights, operating_points=points)
    expected = len(weights.features)
    if not (len(weights.mean) == len(weights.scale) == len(weights.coef) == expected):
        raise JudgeUnavailable("The judge file is inconsistent.")
    if ("paragraph" in weights.features) != bool(weights.paragraph_encoder):
        raise JudgeUnavailable("The judge file is inconsistent.")
    return weights


def _encoder(path: Path, spec: dict, what: str) -> CrossEncoder:
    model = _read_checked(path.parent / spec["file"], spec["sha256"], what)
    try:
        return CrossEncoder(model, int(spec.get("max_length", 128)))
    except Exception:  # onnxruntime raises its own types for an unreadable model
        logger.exception("the %s could not be loaded", what)
        raise JudgeUnavailable(f"The {what} could not be loaded.") from None


# The model columns that come before the lexical features, in this order, when named.
MODEL_FEATURES = ("cross_encoder", "paragraph")


class LocalJudge:
    """Scores judge items: the probability that each quote answers its part."""

    def __init__(
        self,
        weights: JudgeWeights,
        cross_encoder: CrossEncoder | None,
        paragraph: CrossEncoder | None = None,
    ) -> None:
        self.weights = weights
        self.cross_encoder = cross_encoder
        self.paragraph = paragraph

    @classmethod
    def load(cls, path: Path = JUDGE_FILE, sha256: str = JUDGE_SHA256) -> "LocalJudge":
        weights = weights_load(path, sha256)
        encoder = paragraph = None
        if weights.cross_encoder:
            encoder = _encoder(path, weights.cross_encoder, "cross-encoder")
        if weights.paragraph_encoder:
            paragraph = _encoder(path, weights.paragraph_encoder, "paragraph judge")
        return cls(weights, encoder, paragraph)

    def paragraph_logits(self, items: list[JudgeItem]) -> np.ndarray:
        """The paragraph judge's logit of each item's (part, whole passage): does anything
        in the passage answer the part. Each distinct pair is run once."""
        if self.paragraph is None:
            raise JudgeUnavailable("The judge needs its paragraph judge.")
        pairs = [
            (item.part, judge_segment(item.passage or item.quote, item.context)) for item in items
        ]
        distinct = list(dict.fromkeys(pairs))
        found = dict(zip(distinct, self.paragraph.logits(distinct).tolist(), strict=True))
        return np.asarray([found[pair] for pair in pairs], dtype=np.float64)

    def feature_matrix(self, items: list[JudgeItem], weights: TermWeights) -> np.ndarray:
        rows = [PairFeatures.of(item, weights).values for item in items]
        matrix = np.array(rows, dtype=np.float64).reshape(len(items), len(FEATURE_NAMES))
        columns = []
        if "cross_encoder" in self.weights.features:
            if self.cross_encoder is None:
                raise JudgeUnavailable("The judge needs its cross-encoder.")
            pairs = [
                (item.part, judge_segment(item.quote, item.context, item.before)) for item in items
            ]
            columns.append(self.cross_encoder.logits(pairs))
        if "paragraph" in self.weights.features:
            columns.append(self.paragraph_logits(items))
        if columns:
            matrix = np.hstack([np.column_stack(columns), matrix])
        return matrix

    def probabilities_of(self, matrix: np.ndarray) -> np.ndarray:
        """The regression's probability, raised to the complete rule's measured precision
        where the rule holds: two experts, the more confident one speaks."""
        w = self.weights
        learned = _sigmoid(((matrix - w.mean) / w.scale) @ w.coef + w.intercept)
        complete = matrix[:, w.features.index("complete")] > 0.5
        return np.where(complete, np.maximum(learned, w.complete_precision), learned)

    def score(self, items: list[JudgeItem], weights: TermWeights) -> list[float]:
        if not items:
            return []
        return self.probabilities_of(self.feature_matrix(items, weights)).tolist()


def pinned_operating_points() -> OperatingPoints:
    """The pinned operating points of the judge that scores answers (one loaded judge per
    process, as `local_judge`). JudgeUnavailable as `weights_load`."""
    points = local_judge().weights.operating_points
    if points is None:  # weights_load never leaves them out
        raise JudgeUnavailable("The judge file has no valid operating points.")
    return points


_loaded: dict[tuple[str, str], LocalJudge] = {}
_lock = threading.Lock()
# A forked child (a prefork worker) loads its own judge: the parent's pool threads and ONNX
# session do not come along with the fork.
os.register_at_fork(after_in_child=_loaded.clear)


def local_judge() -> LocalJudge:
    """One loaded judge per process and file; a failed load is retried on the next call."""
    path, sha256 = JUDGE_FILE, JUDGE_SHA256  # read at call time: a test may swap the file
    key = (str(path), sha256)
    with _lock:
        if key not in _loaded:
            _loaded[key] = LocalJudge.load(path, sha256)
        return _loaded[key]
