"""The Go client (clients/go, standard library only): its `go test` suite against the
suite's live Daphne and Celery worker — a strict-policy answer that verifies, changes
reported by name, streams cut after every event, typed errors, an omitted report left nil,
the conformance vectors (issue 31); the answer log's vectors, and the log prepared by
`log_scenario`: a genuine answer's inclusion, a rewritten receipt and a forked log refused
(issue 51)."""

import re

import pytest

from tests.clients.helpers import suite_environment, suite_run, toolchain
from tests.services import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

MODULE = ROOT / "clients" / "go"
TESTS = 21


def test_the_go_client_suite_passes_against_the_live_server(
    live_server_url, celery_worker, library, member, outsider, log_scenario
):
    go = toolchain("go", "make clients-go")
    env = suite_environment(live_server_url=live_server_url, reader=member, outsider=outsider)
    env.update(log_scenario)
    # The standard library only: nothing to fetch, and nothing may be; the build cache
    # under var/ where no home directory gives one.
    env.update(GOPROXY="off", GOTOOLCHAIN="local")
    env.setdefault("GOCACHE", str(ROOT / "var" / "go-build"))
    output = suite_run([go, "test", "-count=1", "-v", "."], cwd=MODULE, env=env)
    passed = re.findall(r"^--- PASS: (\w+)", output, re.M)
    assert not re.search(r"^--- (FAIL|SKIP)", output, re.M), output
    assert len(passed) == TESTS, output
