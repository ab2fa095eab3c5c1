import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tools.topology.harness import Topology


@pytest.fixture(scope="session")
def topology() -> Iterator[Topology]:
    """The multi-host topology (tools/topology), started once for these tests.

    Under a short path of its own (PostgreSQL's unix sockets live in its directories); its
    processes' logs are kept in the suite's logs directory (var/test/logs/topology)."""
    base = Path(tempfile.mkdtemp(prefix="topo-", dir="/tmp"))
    topology = Topology(base)
    try:
        yield topology.start()
    finally:
        topology.stop()
        kept = settings.DATA_DIR / "logs" / "topology"
        shutil.rmtree(kept, ignore_errors=True)
        if topology.logs.exists():
            shutil.copytree(topology.logs, kept)
        shutil.rmtree(base, ignore_errors=True)
