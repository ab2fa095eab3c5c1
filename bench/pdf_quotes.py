"""Clean quotes from PDFs (issue 51, item 4): candidate quotes carrying the page's furniture.

Every PDF fixture of the repository (tests/data/**/*.pdf) and of the demo data
(knowledge/demo/**/*.pdf), and any PDF given with --also (measured, not shipped), is
extracted by both readings (pdfplumber, pypdf) twice in the same run: `before`, the page
texts as the libraries give them (`clean=False`), and `after`, cleaned by
knowledge.extraction.pdf_layout. Each reading is chunked into passages as the pipeline
does (knowledge.chunking), and each passage's candidate quotes are the spans the
extractive selector may quote (answers.pipeline.providers.extractive.quote_spans: its
sentences but labels, and a sentence with the one-line label or sentence above it).

Figures per reading:
- quotes: candidate quotes;
- number first: quotes that begin with a page or section number ("1 1 Introduction This
  document …", "2.1 Scope The handbook …"): a number (dotted parts allowed, no closing
  "." or ")" of a list item) followed by a capitalised word or another number;
- hyphen break: quotes holding a line-break hyphen (a letter, "-", a line break, a letter);
- page line: quotes holding a line that is only a page number ("7", "Page 7 of 12");
- twice: quotes of the reading whose words are also in the other reading (the second quote
  check, answers.pipeline.validation: normalised keys, without spaces in a damaged other
  reading), as a share;
- damage: the reading's extraction_damage (knowledge.extraction.damage), the highest of the
  files.
The row `served` adds up, file by file, the reading that serves passages (the primary,
unless it is damaged and the secondary clean: knowledge.extraction.damage.serving_role).
The goal: 0 quotes with a number first, a hyphen break or a page line, after.

Run: .venv/bin/python bench/pdf_quotes.py [--also FILE.pdf ...] [--show N]
No database and no services: extraction, chunking and the selector's spans only.
"""

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from common.bootstrap import ROOT

sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koinon.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from answers.pipeline.providers.extractive import quote_spans  # noqa: E402
from answers.pipeline.vocabulary import CandidateView  # noqa: E402
from knowledge.chunking import chunk  # noqa: E402
from knowledge.extraction import ExtractionResult, Limits  # noqa: E402
from knowledge.extraction.damage import extraction_damage, serving_role  # noqa: E402
from knowledge.extraction.pdf import extract_primary, extract_secondary  # noqa: E402
from knowledge.normalise import normalised_key  # noqa: E402

FIXTURE_DIRS = (ROOT / "tests" / "data", ROOT / "knowledge" / "demo")
LIMITS = Limits(max_chars=5_000_000, max_pages=2000)

NUMBER_FIRST = re.compile(r"\d{1,4}(?:\.\d{1,3})*(?![.)\d])\s+(?:[A-Z]|\d)")
HYPHEN_BREAK = re.compile(r"[^\W\d_]-[ \t]*\n\s*[^\W\d_]")
PAGE_LINE = re.compile(r"^\s*(?:page\s+)?\d{1,5}(?:\s*(?:of|/)\s*\d{1,5})?\s*$", re.I | re.M)


@dataclass
class Figures:
    quotes: int = 0
    number_first: int = 0
    hyphen_break: int = 0
    page_line: int = 0
    twice: int = 0
    damage: float = 0.0
    examples: list[str] = field(default_factory=list)

    def add(self, other: "Figures") -> None:
        for name in ("quotes", "number_first", "hyphen_break", "page_line", "twice"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.damage = max(self.damage, other.damage)
        self.examples += other.examples


def candidate_quotes(result: ExtractionResult, title: str) -> list[str]:
    """The quotes the extractive selector may cut from this reading's passages."""
    quotes = []
    for number, span in enumerate(chunk(result.text, result.segments)):
        text = result.text[span.char_start : span.char_end]
        candidate = CandidateView(
            fact_id=f"q{number}", kind="quote", text=text, label="", searches=(0,), score=1.0,
            title=title,
        )  # fmt: skip
        quotes += [text[start:end] for start, end, _ in quote_spans(candidate)]
    return quotes


def measure(result: ExtractionResult, title: str, other: ExtractionResult) -> Figures:
    figures = Figures(damage=extraction_damage(result.text))
    other_key = normalised_key(other.text)
    # As QUOTES_SECONDARY_SQL: in a damaged reading the words are looked for without spaces.
    squeezed = extraction_damage(other.text) > settings.KOINON_EXTRACTION_DAMAGE_THRESHOLD
    if squeezed:
        other_key = other_key.replace(" ", "")
    for quote in candidate_quotes(result, title):
        figures.quotes += 1
        flagged = False
        if NUMBER_FIRST.match(quote):
            figures.number_first += 1
            flagged = True
        if HYPHEN_BREAK.search(quote):
            figures.hyphen_break += 1
            flagged = True
        if PAGE_LINE.search(quote):
            figures.page_line += 1
            flagged = True
        key = normalised_key(quote)
        if (key.replace(" ", "") if squeezed else key) in other_key:
            figures.twice += 1
        if flagged:
            figures.examples.append(" ".join(quote.split())[:110])
    return figures


def measure_file(path: Path, *, clean: bool) -> dict[str, Figures]:
    data = path.read_bytes()
    primary = extract_primary(data, LIMITS, clean=clean)
    secondary = extract_secondary(data, LIMITS, clean=clean)
    readings = {
        "pdfplumber": measure(primary, path.stem, secondary),
        "pypdf": measure(secondary, path.stem, primary),
    }
    role = serving_role(
        {"primary": readings["pdfplumber"].damage, "secondary": readings["pypdf"].damage},
        threshold=settings.KOINON_EXTRACTION_DAMAGE_THRESHOLD,
    )
    readings["served"] = readings["pdfplumber" if role == "primary" else "pypdf"]
    return readings


def report(title: str, files: list[Path], show: int) -> None:
    print(f"\n{title}: {len(files)} PDF(s): {', '.join(f.name for f in files) or 'none'}")
    print(f"{'run':7} {'reading':11} {'quotes':>6} {'number first':>12} {'hyphen break':>12} "
          f"{'page line':>9} {'twice':>6} {'damage':>6}")  # fmt: skip
    for clean, run in ((False, "before"), (True, "after")):
        totals = {"pdfplumber": Figures(), "pypdf": Figures(), "served": Figures()}
        for path in files:
            for reading, figures in measure_file(path, clean=clean).items():
                totals[reading].add(figures)
        for reading, figures in totals.items():
            twice = f"{figures.twice / figures.quotes:.2f}" if figures.quotes else "-"
            print(
                f"{run:7} {reading:11} {figures.quotes:6d} {figures.number_first:12d} "
                f"{figures.hyphen_break:12d} {figures.page_line:9d} {twice:>6} "
                f"{figures.damage:6.2f}"
            )
            for example in figures.examples[:show]:
                print(f"        · {example}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--also", nargs="*", type=Path, default=[], help="more PDFs to measure")
    parser.add_argument("--show", type=int, default=3, help="flagged quotes shown per reading")
    args = parser.parse_args()
    fixtures = sorted(p for d in FIXTURE_DIRS for p in d.rglob("*.pdf"))
    report("Repository fixtures", fixtures, args.show)
    if args.also:
        report("Given with --also (not in the repository)", args.also, args.show)


if __name__ == "__main__":
    main()
