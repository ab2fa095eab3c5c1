"""The app's import graph, read from the source with `ast` (issue 49, items 5 and 6).

    python -m tools.import_graph            # the measures, one per line
    python -m tools.import_graph --imports  # every function-level import, with its line

A module-level and a function-level import are both edges: a circle closed only inside a
function still ties the two modules together. Edges under `if TYPE_CHECKING:` are left out of the
app's graph (they never run) and counted in the Python client's (clients/python), whose models
must not know the client even for their types. Tests, tools, benchmarks and migrations are not
the app and are not read.

Measures: circles (strongly connected components of more than one module, and modules that
import themselves), the longest chain of imports inside `answers.pipeline`, how many imports sit
inside a function, and how many times `Any` is named.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = (
    "core",
    "knowledge",
    "datasets",
    "outside",
    "answers",
    "audit",
    "memory",
    "worldmodel",
    "conversations",
    "chat",
    "mcp_server",
    "koinon",
    "outside",
)
CLIENT_ROOT = ROOT / "clients" / "python"
CLIENT_PACKAGES = ("koinon_client",)
SKIPPED_PARTS = frozenset({"migrations", "tests", "tools", "bench", "__pycache__"})


@dataclass(frozen=True)
class FunctionImport:
    module: str
    line: int
    target: str
    reason: bool  # a comment on the import, or on the run of imports and comments above it


@dataclass
class Graph:
    edges: dict[str, set[str]] = field(default_factory=dict)
    function_imports: list[FunctionImport] = field(default_factory=list)
    any_mentions: int = 0
    # (importing module, imported module, name): a `_name` taken from another app
    private_across_apps: list[tuple[str, str, str]] = field(default_factory=list)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def app_files(root: Path = ROOT, packages: tuple[str, ...] = APPS) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for app in packages:
        for path in sorted((root / app).rglob("*.py")):
            if SKIPPED_PARTS.intersection(path.relative_to(root).parts):
                continue
            files[module_name(path, root)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """Every module an import may load: `from a import b` loads `a` and, if it is one, `a.b`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _resolve(node, module, is_package)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


class _Reader(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, type_checking: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.type_checking = type_checking
        self.depth = 0
        self.imports: list[tuple[str, int, bool]] = []
        self.private_names: list[tuple[str, str]] = []
        self.any_mentions = 0

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test) and not self.type_checking:
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def _visit_import(self, node: ast.Import | ast.ImportFrom) -> None:
        for target in _targets(node, self.module, self.is_package):
            self.imports.append((target, node.lineno, self.depth > 0))
        if isinstance(node, ast.ImportFrom):
            base = _resolve(node, self.module, self.is_package)
            self.private_names += [
                (base, alias.name)
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]

    visit_Import = _visit_import
    visit_ImportFrom = _visit_import

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Any":
            self.any_mentions += 1

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "Any":
            self.any_mentions += 1
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # A quoted annotation ("dict[str, Any]") names Any too.
        if isinstance(node.value, str) and "Any" in node.value and len(node.value) < 200:
            try:
                parsed = ast.parse(node.value, mode="eval")
            except SyntaxError:
                return
            self.any_mentions += sum(
                isinstance(sub, ast.Name) and sub.id == "Any" for sub in ast.walk(parsed)
            )


def _has_reason(source: list[str], line: int) -> bool:
    """Whether the import at `line` (1-based) carries a comment, or sits in a run of import and
    comment lines of which one is a comment (one reason may stand above two imports)."""
    if "#" in source[line - 1]:
        return True
    index = line - 2
    while index >= 0:
        text = source[index].strip()
        if text.startswith("#"):
            return True
        if not text.startswith(("import ", "from ")):
            return False
        if "#" in text:
            return True
        index -= 1
    return False


def build(
    root: Path = ROOT, packages: tuple[str, ...] = APPS, *, type_checking: bool = False
) -> Graph:
    """The graph of `packages` under `root`; `type_checking`: count imports that only the type
    checker runs too."""
    files = app_files(root, packages)
    graph = Graph()
    for module, path in files.items():
        reader = _Reader(module, path.name == "__init__.py", type_checking)
        source = path.read_text().splitlines()
        reader.visit(ast.parse("\n".join(source), filename=str(path)))
        graph.any_mentions += reader.any_mentions
        graph.private_across_apps += [
            (module, base, name)
            for base, name in reader.private_names
            if base.split(".")[0] in packages and base.split(".")[0] != module.split(".")[0]
        ]
        targets = graph.edges.setdefault(module, set())
        seen_function_lines: set[int] = set()
        for target, line, in_function in reader.imports:
            if in_function and line not in seen_function_lines:
                seen_function_lines.add(line)
                graph.function_imports.append(
                    FunctionImport(module, line, target, _has_reason(source, line))
                )
            if target in files and target != module:
                targets.add(target)
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def longest_chain(edges: dict[str, set[str]], prefix: str) -> list[str]:
    """The longest path of imports among modules under `prefix`; empty while they hold a circle."""
    inside = {m: {t for t in ts if t.startswith(prefix)} for m, ts in edges.items()}
    inside = {m: ts for m, ts in inside.items() if m.startswith(prefix)}
    if cycles(inside):
        return []

    @cache
    def from_(module: str) -> tuple[str, ...]:
        best: tuple[str, ...] = ()
        for nxt in inside.get(module, ()):
            candidate = from_(nxt)
            if len(candidate) > len(best):
                best = candidate
        return (module, *best)

    return list(max((from_(m) for m in sorted(inside)), key=len, default=()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", action="store_true", help="list the function-level imports")
    args = parser.parse_args(argv)
    graph = build()
    found = cycles(graph.edges)
    print(f"modules: {len(graph.edges)}")
    print(f"circles: {len(found)}")
    for component in found:
        print(f"  {len(component)}: {' '.join(component)}")
    chain = longest_chain(graph.edges, "answers.pipeline")
    print(f"longest chain in answers.pipeline: {len(chain)} modules: {' -> '.join(chain)}")
    print(f"function-level imports: {len(graph.function_imports)}")
    print(f"Any mentions: {graph.any_mentions}")
    client = cycles(build(CLIENT_ROOT, CLIENT_PACKAGES, type_checking=True).edges)
    print(f"circles in the Python client (with TYPE_CHECKING imports): {len(client)}")
    for component in client:
        print(f"  {len(component)}: {' '.join(component)}")
    print(f"private names imported across apps: {len(graph.private_across_apps)}")
    for module, base, name in graph.private_across_apps:
        print(f"  {module} imports {base}.{name}")
    unexplained = [item for item in graph.function_imports if not item.reason]
    print(f"function-level imports without a reason: {len(unexplained)}")
    if args.imports:
        for item in graph.function_imports:
            print(
                f"  {item.module}:{item.line} {item.target}{'' if item.reason else '  (no reason)'}"
            )
    return 1 if found or client else 0


if __name__ == "__main__":
    raise SystemExit(main())
