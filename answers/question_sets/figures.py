"""The figures of a question set's run, from its stored results alone (no rerun): each
question's outcome at a threshold, the counts and rates, and the curve over thresholds.

A question's outcome at threshold t keeps the released quotes the judge scored at least t:
supported when one of them holds the expected text (the same words as the quote checks
compare: `normalised_key`, so case, punctuation and spacing do not matter), wrong when
quotes remain and none holds it — or any remains for a question marked not answerable —
and abstained when none remains. Above the run's own point this is what the pipeline would
release at best: it might have found another quote on a retry, so coverage there is a lower
bound. Below the run's point nothing was measured (the quotes the judge refused there are
not kept): the curve starts at the point the run judged at."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from knowledge.normalise import normalised_key

SUPPORTED, WRONG, ABSTAINED, FAILED = "supported", "wrong", "abstained", "failed"
CURVE_STEP = 0.02


class ReleasedQuote(TypedDict):
    quote: str
    score: float | None  # None: the audit could not tell this quote's score


class ResultLike(Protocol):
    @property
    def expected(self) -> str: ...
    @property
    def quotes(self) -> list[ReleasedQuote]: ...
    @property
    def failed(self) -> bool: ...


@dataclass(frozen=True)
class Scored:
    """What the figures read of one question's result."""

    expected: str
    quotes: list[ReleasedQuote]
    failed: bool = False


def holds(quote: str, expected: str) -> bool:
    """Whether the quote holds the expected text, word for word after normalisation."""
    key = normalised_key(expected)
    return bool(key) and key in normalised_key(quote)


def outcome_at(result: ResultLike, threshold: float, run_point: float) -> str:
    """The question's outcome had only quotes scored ≥ threshold been released. A quote with
    no score counts as scored at the run's point (it was released there, nothing more is
    known)."""
    if result.failed:
        return FAILED
    kept = [
        q["quote"]
        for q in result.quotes
        if (run_point if q["score"] is None else q["score"]) >= threshold
    ]
    if not kept:
        return ABSTAINED
    if result.expected and any(holds(quote, result.expected) for quote in kept):
        return SUPPORTED
    return WRONG


@dataclass(frozen=True)
class Tally:
    threshold: float
    supported: int
    wrong: int
    abstained: int
    failed: int
    answerable: int

    @property
    def counted(self) -> int:
        return self.supported + self.wrong + self.abstained

    def _rate(self, count: int, of: int) -> float | None:
        return round(count / of, 3) if of else None

    @property
    def supported_rate(self) -> float | None:
        return self._rate(self.supported, self.counted)

    @property
    def wrong_rate(self) -> float | None:
        return self._rate(self.wrong, self.counted)

    @property
    def abstained_rate(self) -> float | None:
        return self._rate(self.abstained, self.counted)

    @property
    def precision(self) -> float | None:
        """Of the questions that got quotes, the share whose quotes hold the answer."""
        return self._rate(self.supported, self.supported + self.wrong)

    @property
    def coverage(self) -> float | None:
        """Of the answerable questions, the share answered with the expected text."""
        return self._rate(self.supported, self.answerable)


def tally(results: Sequence[ResultLike], threshold: float, run_point: float) -> Tally:
    outcomes = [outcome_at(result, threshold, run_point) for result in results]
    return Tally(
        threshold=threshold,
        supported=outcomes.count(SUPPORTED),
        wrong=outcomes.count(WRONG),
        abstained=outcomes.count(ABSTAINED),
        failed=outcomes.count(FAILED),
        answerable=sum(1 for r in results if r.expected and not r.failed),
    )


def curve_thresholds(run_point: float) -> list[float]:
    """The run's point and every CURVE_STEP above it, below 1."""
    steps = {round(CURVE_STEP * i, 2) for i in range(1, round(1 / CURVE_STEP))}
    return sorted({round(run_point, 4)} | {s for s in steps if s > run_point})


def curve(results: Sequence[ResultLike], run_point: float) -> list[Tally]:
    return [tally(results, t, run_point) for t in curve_thresholds(run_point)]


def curve_svg_points(rows: Sequence[Tally], *, width: int, height: int) -> dict[str, str]:
    """SVG polyline points (x: threshold 0–1, y: rate 0–1, top is 1) for precision and
    coverage; rows without a rate are left out."""

    def line(values: list[tuple[float, float | None]]) -> str:
        return " ".join(
            f"{round(x * width, 1)},{round((1 - y) * height, 1)}"
            for x, y in values
            if y is not None
        )

    return {
        "precision": line([(row.threshold, row.precision) for row in rows]),
        "coverage": line([(row.threshold, row.coverage) for row in rows]),
    }
