"""What the per-domain report of bench/quality.py records of its command: the repository's
paths relative to it, and no option naming where this machine wrote a file (the report is
committed, and no machine path may be).

Nothing here touches the database.
"""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_recorded_command_leaves_out_where_files_were_written(tmp_path):
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))  # appended: bench/datasets.py must not shadow the app
    from common.bootstrap import ROOT
    from common.quality_report import shown_command

    arguments = [
        "--corpus",
        "all",
        "--details",
        str(tmp_path / "all.jsonl"),
        f"--plot={tmp_path / 'curve.png'}",
        "--domain-report",
        str(tmp_path / "report"),
        "--baseline-judge",
        f"{ROOT}/var/judge/old.json",
        "--thresholds",
        "0.3,0.48",
    ]
    assert shown_command(arguments) == (
        "--corpus all --baseline-judge var/judge/old.json --thresholds 0.3,0.48"
    )
