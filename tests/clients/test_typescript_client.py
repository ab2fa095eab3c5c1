"""The TypeScript client (clients/typescript, npm package `koinon-client`): its node test
suite (`node --test`) against the suite's live Daphne and Celery worker — a strict-policy
answer that verifies, changes reported by name, streams cut after every event, typed
errors, an omitted report left undefined, the conformance vectors (issue 31); the answer
log's vectors, and the log prepared by `log_scenario`: a genuine answer's inclusion, a
rewritten receipt and a forked log refused (issue 51)."""

import re
import subprocess

import pytest

from tests.clients.helpers import suite_environment, suite_run, toolchain
from tests.services import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = ROOT / "clients" / "typescript"
INSTALL = "make clients-typescript"
SUITES = ("conformance", "transparency", "live", "log")


def test_the_typescript_client_suite_passes_against_the_live_server(
    live_server_url, celery_worker, library, member, outsider, log_scenario
):
    node = toolchain("node", INSTALL)
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    assert int(version.lstrip("v").split(".")[0]) >= 20, f"Node 20 or later, not {version}"
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    if not tsc.exists():
        pytest.fail(f"the TypeScript compiler is not installed: `{INSTALL}` installs it")
    env = suite_environment(live_server_url=live_server_url, reader=member, outsider=outsider)
    env.update(log_scenario)
    suite_run([node, str(tsc), "-p", "."], cwd=PACKAGE, env=env)
    tests = [f"dist/test/{name}.test.js" for name in SUITES]
    output = suite_run([node, "--test", "--test-reporter=tap", *tests], cwd=PACKAGE, env=env)
    passed = int(re.search(r"^# pass (\d+)$", output, re.M).group(1))
    assert re.search(r"^# fail 0$", output, re.M) and re.search(r"^# skipped 0$", output, re.M)
    assert passed == 22, output
