from collections.abc import Iterator

import pytest

from tools.topology.harness import Topology


@pytest.fixture(scope="session")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    """The multi-host topology (tools/topology), started once for these tests.

    Under a short path of its own: PostgreSQL's unix sockets live in its directories."""
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="topo-", dir="/tmp"))
    topology = Topology(base).start()
    try:
        yield topology
    finally:
        topology.stop()
        import shutil

        shutil.rmtree(base, ignore_errors=True)
