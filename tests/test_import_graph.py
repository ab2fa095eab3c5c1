"""The app's imports form no circle, and an import inside a function says why it is there
(issue 49, items 5 and 6). Read from the source by tools/import_graph.py: no database."""

from pathlib import Path

from tools import import_graph

# Owned by the judge's own change in issue 49 (answers/judge is being reworked beside this):
# its imports inside functions and its one private name from knowledge are left to it.
MAX_FUNCTION_IMPORTS = 40
# The answer pipeline's longest chain of imports, in modules (issue 49: it was 12).
MAX_PIPELINE_CHAIN = 7
# Issue 49's goal for `Any` named in app code (it was 77 when this bound was set).
MAX_ANY_MENTIONS = 60


def test_the_apps_import_no_module_that_imports_them_back():
    graph = import_graph.build()
    assert import_graph.cycles(graph.edges) == []


def test_the_python_clients_models_do_not_import_the_client_even_for_types():
    graph = import_graph.build(
        import_graph.CLIENT_ROOT, import_graph.CLIENT_PACKAGES, type_checking=True
    )
    assert "koinon_client.models" in graph.edges
    assert import_graph.cycles(graph.edges) == []


def test_imports_inside_functions_are_few_and_each_gives_its_reason():
    imports = import_graph.build().function_imports
    assert len(imports) <= MAX_FUNCTION_IMPORTS
    unexplained = [
        f"{item.module}:{item.line} {item.target}" for item in imports if not item.reason
    ]
    assert unexplained == []


def test_the_answer_pipelines_longest_chain_of_imports_is_at_most_seven_modules():
    chain = import_graph.longest_chain(import_graph.build().edges, "answers.pipeline")
    assert chain, "answers.pipeline holds a circle"
    assert len(chain) <= MAX_PIPELINE_CHAIN, " -> ".join(chain)


def test_no_app_imports_another_apps_private_name():
    found = [
        (module, f"{base}.{name}")
        for module, base, name in import_graph.build().private_across_apps
    ]
    assert found == []


def test_app_code_names_any_at_most_sixty_times():
    assert import_graph.build().any_mentions <= MAX_ANY_MENTIONS


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_circle_closed_inside_a_function_is_found(tmp_path):
    write(tmp_path, "shop/__init__.py", "")
    write(tmp_path, "shop/services.py", "def sell():\n    from shop.tasks import ship\n")
    write(tmp_path, "shop/tasks.py", "from shop.services import sell\n")
    graph = import_graph.build(tmp_path, ("shop",))
    assert import_graph.cycles(graph.edges) == [["shop.services", "shop.tasks"]]
    assert [(i.module, i.target, i.reason) for i in graph.function_imports] == [
        ("shop.services", "shop.tasks", False)
    ]


def test_an_import_only_the_type_checker_runs_counts_only_when_asked(tmp_path):
    write(tmp_path, "shop/__init__.py", "")
    write(
        tmp_path,
        "shop/models.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shop.client import Client\n",
    )
    write(tmp_path, "shop/client.py", "from shop.models import Order\n")
    assert import_graph.cycles(import_graph.build(tmp_path, ("shop",)).edges) == []
    typed = import_graph.build(tmp_path, ("shop",), type_checking=True)
    assert import_graph.cycles(typed.edges) == [["shop.client", "shop.models"]]


def test_a_reason_is_a_comment_on_the_import_or_above_its_run_of_imports(tmp_path):
    write(
        tmp_path,
        "shop/heavy.py",
        "def draw():\n"
        "    # Heavy: loaded only where a page is drawn.\n"
        "    import json\n"
        "    import csv\n"
        "\n"
        "def parse():\n"
        "    import ast  # the parser, for this one call\n"
        "\n"
        "def idle():\n"
        "    x = 1\n"
        "    import os\n",
    )
    imports = import_graph.build(tmp_path, ("shop",)).function_imports
    assert [(i.target, i.reason) for i in imports] == [
        ("json", True),
        ("csv", True),
        ("ast", True),
        ("os", False),
    ]


def test_any_is_counted_as_a_name_an_attribute_and_in_a_quoted_annotation(tmp_path):
    write(tmp_path, "shop/__init__.py", "")
    write(
        tmp_path,
        "shop/models.py",
        "import typing\n"
        "from typing import Any\n"
        "def price(x: Any, y: typing.Any) -> 'dict[str, Any]':\n"
        '    """Any docstring is prose, not a type."""\n'
        "    return {}\n",
    )
    assert import_graph.build(tmp_path, ("shop",)).any_mentions == 3
