"""Each client installed the way its README says, into a scratch project outside the
checkout, runs its README's quickstart against the suite's live Daphne (issue 51, item 3):
the Python wheel in a fresh venv, the npm tarball in a fresh npm project, the Go module
through its `replace` line. The quickstart is read from the README itself (the block after
`<!-- quickstart: … -->`), and the install commands the README shows are the ones run here,
so the docs cannot drift from what works. Nothing is fetched from a registry."""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from tests.clients.helpers import TEXT, readme_quickstart, toolchain
from tests.services import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

CLIENTS = ROOT / "clients"
WHEEL = "koinon_client-0.1.0-py3-none-any.whl"
TARBALL = "koinon-client-0.1.0.tgz"
TYPESCRIPT = CLIENTS / "typescript"
GO_INSTALL = (
    "go mod edit -replace koinon/client=../koinon/clients/go",
    "go get koinon/client",
)


def command_run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run one step to its end; its output, or a failure that shows it."""
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{command}:\n{output}"
    return output


def quickstart_environment(
    *, live_server_url: str, reader_key: str, base: dict[str, str] | None = None
) -> dict[str, str]:
    """What each quickstart reads: the server and a reader's API key."""
    base = dict(os.environ) if base is None else base
    return {**base, "KOINON_URL": live_server_url, "KOINON_API_KEY": reader_key}


def assert_answered(output: str) -> None:
    """The quickstart's first line is the answer status and whether the release verified;
    then the answer, which quotes the corpus."""
    assert output.splitlines()[0].lower() == "evidence_backed true", output
    assert f"“{TEXT}”" in output, output


def test_the_python_wheel_installed_in_a_fresh_venv_runs_the_readme_quickstart(
    live_server_url, corpus, reader_key, tmp_path
):
    readme = CLIENTS / "python" / "README.md"
    shown = readme.read_text()
    assert "python -m pip wheel --no-deps ./clients/python -w dist" in shown
    assert f"python -m pip install /path/to/koinon/dist/{WHEEL}" in shown
    # A copy of the checkout's client: the build leaves build/ and *.egg-info beside it.
    checkout = tmp_path / "koinon"
    shutil.copytree(
        CLIENTS / "python",
        checkout / "clients" / "python",
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    # The README's command, built by the suite venv's setuptools rather than an isolated
    # build environment, which pip would fill from PyPI.
    build = ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "./clients/python"]
    command_run([sys.executable, "-m", "pip", *build, "-w", "dist"], cwd=checkout)
    wheel = checkout / "dist" / WHEEL
    project = tmp_path / "project"
    venv = project / ".venv"
    command_run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = str(venv / "bin" / "python")
    install = [python, "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)]
    command_run(install, cwd=project)
    # The dependencies pip would fetch come from the suite's venv, as a path entry after
    # the scratch venv's own site-packages. The suite's editable koinon_client is not on
    # that path (a path entry's .pth files are never read): the wheel's copy is imported.
    scratch = command_run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=project
    )
    Path(scratch.strip(), "suite_dependencies.pth").write_text(sysconfig.get_path("purelib"))
    imported = command_run(
        [python, "-c", "import koinon_client; print(koinon_client.__file__)"], cwd=project
    )
    assert Path(imported.strip()).resolve().is_relative_to(venv.resolve()), imported
    (project / "quickstart.py").write_text(readme_quickstart(readme, "python"))
    env = quickstart_environment(live_server_url=live_server_url, reader_key=reader_key)
    assert_answered(command_run([python, "quickstart.py"], cwd=project, env=env))


def test_the_typescript_tarball_installed_in_a_scratch_project_runs_the_readme_quickstart(
    live_server_url, corpus, reader_key, tmp_path
):
    node = toolchain("node", "make clients-typescript")
    npm = toolchain("npm", "make clients-typescript")
    tsc = TYPESCRIPT / "node_modules" / "typescript" / "bin" / "tsc"
    if not tsc.exists():
        pytest.fail("the TypeScript compiler is not installed: `make clients-typescript`")
    readme = TYPESCRIPT / "README.md"
    shown = readme.read_text()
    assert "cd clients/typescript && npm ci && npm pack" in shown
    assert f"npm install /path/to/koinon/clients/typescript/{TARBALL}" in shown
    npm_env = {**os.environ, "NPM_CONFIG_UPDATE_NOTIFIER": "false"}
    # `npm pack` (its prepack script builds dist/), written here rather than in the checkout.
    command_run([npm, "pack", "--pack-destination", str(tmp_path)], cwd=TYPESCRIPT, env=npm_env)
    with tarfile.open(tmp_path / TARBALL) as packed:
        files = set(packed.getnames())
    assert {"package/dist/src/index.js", "package/dist/src/index.d.ts"} <= files
    assert not [name for name in files if "/test/" in name], files  # the suites stay home
    project = tmp_path / "project"
    project.mkdir()
    manifest = {"name": "quickstart", "private": True, "type": "module"}
    (project / "package.json").write_text(json.dumps(manifest))
    # No runtime dependency: the tarball installs with no registry at all.
    command_run(
        [npm, "install", "--offline", "--no-audit", "--no-fund", str(tmp_path / TARBALL)],
        cwd=project,
        env=npm_env,
    )
    installed = project / "node_modules" / "koinon-client"
    assert installed.is_dir() and not installed.is_symlink()
    (project / "quickstart.ts").write_text(readme_quickstart(readme, "ts"))
    # Compiled against the installed declarations, strictly, as the README says; Node's
    # types (for `process`) from the client's own pinned dev dependencies.
    options = {
        "target": "ES2022",
        "module": "NodeNext",
        "moduleResolution": "NodeNext",
        "lib": ["ES2022"],
        "strict": True,
        "types": ["node"],
        "typeRoots": [str(TYPESCRIPT / "node_modules" / "@types")],
        "outDir": "dist",
    }
    tsconfig = {"compilerOptions": options, "files": ["quickstart.ts"]}
    (project / "tsconfig.json").write_text(json.dumps(tsconfig))
    command_run([node, str(tsc), "-p", "."], cwd=project)
    env = quickstart_environment(live_server_url=live_server_url, reader_key=reader_key)
    assert_answered(command_run([node, "dist/quickstart.js"], cwd=project, env=env))


def test_the_go_module_required_by_its_replace_line_runs_the_readme_quickstart(
    live_server_url, corpus, reader_key, tmp_path
):
    go = toolchain("go", "make clients-go")
    readme = CLIENTS / "go" / "README.md"
    assert "\n".join(GO_INSTALL) in readme.read_text()
    # The README's layout: the koinon checkout beside the scratch module.
    (tmp_path / "koinon").symlink_to(ROOT, target_is_directory=True)
    project = tmp_path / "quickstart"
    project.mkdir()
    # Standard library only: nothing to fetch, and nothing may be. The build cache under
    # var/ as for the client's own suite, a module cache of the test's own.
    env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local", "GOFLAGS": ""}
    env.setdefault("GOCACHE", str(ROOT / "var" / "go-build"))
    env["GOMODCACHE"] = str(tmp_path / "go-modules")
    command_run([go, "mod", "init", "example.com/quickstart"], cwd=project, env=env)
    for line in GO_INSTALL:
        command_run([go, *line.split()[1:]], cwd=project, env=env)
    assert re.search(r"^require koinon/client v", (project / "go.mod").read_text(), re.M)
    (project / "main.go").write_text(readme_quickstart(readme, "go"))
    env = quickstart_environment(live_server_url=live_server_url, reader_key=reader_key, base=env)
    assert_answered(command_run([go, "run", "."], cwd=project, env=env))
