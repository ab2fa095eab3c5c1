"""The goal of bench/pdf_quotes.py (issue 51, item 4): over the repository's PDF fixtures, no
candidate quote begins with a page or section number or holds a line-break hyphen or a page
number line, while the same fixtures read without the cleaning have such quotes.

Nothing here touches the database.
"""

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module():
    # Appended, not put first: bench/datasets.py must not shadow the project's datasets app.
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_pdf_quotes", BENCH / "pdf_quotes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_fixture_quote_carries_the_page_furniture_after_the_cleaning():
    bench = bench_module()
    fixtures = sorted(p for folder in bench.FIXTURE_DIRS for p in folder.rglob("*.pdf"))
    assert fixtures
    before, after = bench.Figures(), bench.Figures()
    for path in fixtures:
        before.add(bench.measure_file(path, clean=False)["served"])
        after.add(bench.measure_file(path, clean=True)["served"])
    assert before.number_first and before.hyphen_break and before.page_line
    assert (after.number_first, after.hyphen_break, after.page_line) == (0, 0, 0)
    assert after.quotes and after.twice == after.quotes  # every quote is in both readings
