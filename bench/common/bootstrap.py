"""Paths of the benchmarks and the Django set-up that must come before any model import.

Importing this module imports nothing of the project and reads no settings.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the project: bench/common/bootstrap.py
SHARED_DATA = ROOT.parent / "shared" / "data"
NQ_FILE = SHARED_DATA / "nq-open-oracle.jsonl.gz"
# Variables that would point the bench at a configured (real) server.
SERVER_VARIABLES = ("DATABASE_URL", "REDIS_URL", "KOINON_DATABASE_NAME")


def django_setup(data_dir: Path, **environ: str) -> None:
    """Set Django up on the embedded servers under `data_dir` (KOINON_DATA_DIR).

    The benches drop and recreate their database, so they must never reach a configured
    (real) server: DATABASE_URL, REDIS_URL and KOINON_DATABASE_NAME are removed from the
    environment. `environ` adds variables read at set-up (e.g. KOINON_MODEL_PROVIDER).
    Puts the project first on sys.path (before bench/, whose datasets.py would otherwise
    shadow the project's `datasets` app). Refuses to run twice in one process: the second
    data directory would silently be ignored.
    """
    import django
    from django.conf import settings

    if settings.configured:
        raise RuntimeError("Django is already set up: the bench data directory comes too late")
    sys.path.insert(0, str(ROOT))
    os.environ["KOINON_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "koinon.settings"
    os.environ.update(environ)
    for name in SERVER_VARIABLES:
        os.environ.pop(name, None)
    django.setup()
