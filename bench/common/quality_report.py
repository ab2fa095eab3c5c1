"""The figures of bench/quality.py: the tally of one set's answers, its row, the printed
table, the Wikipedia threshold plot and the per-domain report (table and plot).

Imports nothing of the project: bench/quality.py fills a `Tally` as it asks.
"""

import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from common.bootstrap import ROOT


@dataclass
class Tally:
    """One set's answers under one pipeline: counts, and the judge's and answer's times."""

    answerable: int = 0
    impossible: int = 0
    supported: int = 0
    wrong: int = 0
    abstained_impossible: int = 0
    answered_impossible: int = 0
    quotes: int = 0
    verbatim: int = 0
    label_quotes: int = 0
    judge_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)

    def row(self) -> dict:
        def share(n: int, d: int) -> float | None:
            return round(n / d, 3) if d else None

        judge = sorted(self.judge_ms) or [0.0]
        total = sorted(self.total_ms) or [0.0]
        return {
            "supported": share(self.supported, self.answerable),
            "wrong": share(self.wrong, self.answerable),
            "abstention": share(self.abstained_impossible, self.impossible),
            "precision": share(self.supported, self.supported + self.wrong),
            "coverage": share(self.supported + self.wrong, self.answerable),
            "verbatim": share(self.verbatim, self.quotes),
            "label_quotes": self.label_quotes,
            "judge_p50_ms": round(statistics.median(judge), 2),
            "judge_p95_ms": round(judge[int(0.95 * (len(judge) - 1))], 2),
            "answer_p50_ms": round(statistics.median(total), 1),
        }


def print_row(label: str, row: dict) -> None:
    """One line of the printed table, each figure under its name (print_header)."""
    print(
        f"{label:<22} " + " ".join(f"{v!s:>{max(7, len(k))}}" for k, v in row.items()), flush=True
    )


def print_header() -> None:
    print(f"{'pipeline':<22} " + " ".join(f"{k:>7}" for k in Tally().row()))


def plot(path: Path, curves: dict[str, list[tuple[float, dict]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 4.2), squeeze=False)
    for axis, (name, points) in zip(axes[0], curves.items(), strict=True):
        thresholds = [t for t, _ in points]
        for key, style in (("supported", "o-"), ("wrong", "s-"), ("abstention", "^-")):
            values = [row[key] for _, row in points]
            if all(v is not None for v in values):
                axis.plot(thresholds, values, style, label=key)
        axis.set_title(name)
        axis.set_xlabel("KOINON_JUDGE_THRESHOLD")
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


DOMAIN_COLUMNS = (
    "supported", "wrong", "abstention", "precision", "coverage", "verbatim", "label_quotes",
    "judge_p95_ms",
)  # fmt: skip


# Options whose value is where this machine writes a file: left out of the recorded
# command, which is committed (no machine path in the repository).
_OUTPUT_OPTIONS = ("--details", "--plot", "--domain-report")


def shown_command(arguments: list[str]) -> str:
    """The bench's arguments as a report records them: the repository's own paths relative
    to it, the output options left out."""
    shown: list[str] = []
    skip = False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in _OUTPUT_OPTIONS:
            skip = True
        elif not argument.startswith(tuple(f"{option}=" for option in _OUTPUT_OPTIONS)):
            shown.append(argument.replace(f"{ROOT}/", ""))
    return " ".join(shown)


def domain_report(prefix: Path, curves: dict[str, list[tuple[float, dict]]]) -> None:
    """The new pipeline's figures per set and threshold: a Markdown table (prefix.md) and
    precision over coverage, one line per set, with correct abstention over the threshold
    for the sets that ask unanswerable questions (prefix.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    git = shutil.which("git") or "git"
    # A fixed command: nothing of it comes from input.
    commit = subprocess.run(  # noqa: S603
        [git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    command = shown_command(sys.argv[1:])
    lines = [
        f"`bench/quality.py {command}` at {commit}, {datetime.now(UTC):%Y-%m-%d}: the new "
        'pipeline per set and judge threshold (docs/quality.md, "Per domain").',
        "",
        "| set | threshold | " + " | ".join(c.replace("_", " ") for c in DOMAIN_COLUMNS) + " |",
        "|---|---|" + "---|" * len(DOMAIN_COLUMNS),
    ]
    for name, points in curves.items():
        for threshold, row in points:
            shown = ("—" if row[c] is None else str(row[c]) for c in DOMAIN_COLUMNS)
            lines.append(f"| {name} | {threshold} | " + " | ".join(shown) + " |")
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")

    abstaining = {n: p for n, p in curves.items() if any(r["abstention"] is not None for _, r in p)}
    figure, axes = plt.subplots(1, 2 if abstaining else 1, figsize=(13, 5), squeeze=False)
    for name, points in curves.items():
        shown = [(t, r) for t, r in points if r["precision"] is not None]
        if not shown:
            continue
        line = axes[0][0].plot(
            [r["coverage"] for _, r in shown], [r["precision"] for _, r in shown], "o-", label=name
        )[0]
        labels: dict[tuple[float, float], list[str]] = {}  # thresholds that land on one point
        for threshold, row in shown:
            labels.setdefault((row["coverage"], row["precision"]), []).append(f"{threshold:g}")
        for point, thresholds in labels.items():
            axes[0][0].annotate(
                ", ".join(thresholds), point, fontsize=7, color=line.get_color(),
                xytext=(3, 3), textcoords="offset points",
            )  # fmt: skip
        if name in abstaining:
            axes[0][1].plot(
                [t for t, _ in points], [r["abstention"] for _, r in points], "o-", label=name
            )
    axes[0][0].set(
        xlabel="coverage (answerable questions answered)",
        ylabel="precision (answers that hold)",
        title="precision over coverage, labelled by judge threshold",
        xlim=(0, 1.02), ylim=(0, 1.02),
    )  # fmt: skip
    if abstaining:
        axes[0][1].set(
            xlabel="KOINON_JUDGE_THRESHOLD", ylabel="correct abstention", ylim=(0, 1.02),
            title="unanswerable questions abstained from",
        )  # fmt: skip
    for axis in axes[0]:
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(prefix.with_suffix(".png"), dpi=110)
    print(f"\nper domain: {prefix.with_suffix('.md').name}, {prefix.with_suffix('.png').name}")
