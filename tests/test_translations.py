"""Every string the app marks for translation is translated in each language's compiled
catalogue (the committed `.mo` the app reads: nothing needs gettext at run time).

The strings are found as `makemessages` finds them, without gettext installed: calls of
the gettext functions in the apps' Python (`ast`) and `{% translate %}` /
`{% blocktranslate %}` in their templates (Django's own `templatize`)."""

import ast
import gettext
import re
from pathlib import Path

import pytest
from django.utils.translation.template import templatize

ROOT = Path(__file__).resolve().parent.parent
APPS = [
    "koinon",
    "core",
    "knowledge",
    "datasets",
    "audit",
    "answers",
    "conversations",
    "memory",
    "worldmodel",
    "chat",
    "mcp_server",
]
LANGUAGES = ["de", "fr", "ja"]
SINGULAR = {"_", "gettext", "gettext_lazy", "gettext_noop"}
PLURAL = {"ngettext", "ngettext_lazy"}

Msgid = str | tuple[str, str]  # a plural: (singular, plural)


def _python_msgids(path: Path) -> set[Msgid]:
    found: set[Msgid] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        texts = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if name in SINGULAR and texts and isinstance(texts[0], str):
            found.add(texts[0])
        elif name in PLURAL and len(texts) >= 2 and all(isinstance(t, str) for t in texts[:2]):
            found.add((texts[0], texts[1]))
    return found


# A Python string literal as `templatize` writes it (repr, on one line).
STRING = r"""u?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
TEMPLATE_CALL = re.compile(rf"\b(n?gettext|_)\(({STRING})(?:, ({STRING}))?")


def _template_msgids(path: Path) -> set[Msgid]:
    """`templatize` writes each translatable string as a gettext call amid X-ed out text
    (and keeps a tag argument's `_("…")` as it is)."""
    code = templatize(path.read_text(encoding="utf-8"), origin=str(path))
    found: set[Msgid] = set()
    for name, singular, plural in TEMPLATE_CALL.findall(code):
        text = ast.literal_eval(singular)
        found.add((text, ast.literal_eval(plural)) if name == "ngettext" else text)
    return found


def app_msgids() -> set[Msgid]:
    msgids: set[Msgid] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                msgids |= _python_msgids(path)
    for path in [*ROOT.glob("*/templates/**/*.html"), *(ROOT / "templates").rglob("*.html")]:
        if path.relative_to(ROOT).parts[0] in [*APPS, "templates"]:
            msgids |= _template_msgids(path)
    return msgids


def test_the_extraction_finds_the_strings_makemessages_finds():
    msgids = app_msgids()
    assert "Question sets" in msgids  # a template's {% translate %}
    assert "Answer %(number)s" in msgids  # a {% blocktranslate %} with a variable
    assert "Line %(line)s: %(problem)s" in msgids  # Python's gettext
    assert (
        "%(count)s more line has errors.",
        "%(count)s more lines have errors.",
    ) in msgids  # ngettext


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_marked_string_is_translated_in_the_compiled_catalogue(language):
    mo = ROOT / "locale" / language / "LC_MESSAGES" / "django.mo"
    with mo.open("rb") as file:
        catalogue = gettext.GNUTranslations(file)._catalog  # type: ignore[attr-defined]
    missing = []
    for msgid in sorted(app_msgids(), key=str):
        key = (msgid[0], 0) if isinstance(msgid, tuple) else msgid
        if not catalogue.get(key):  # msgfmt leaves untranslated and fuzzy entries out
            missing.append(msgid)
    assert not missing, (
        f"{len(missing)} strings have no {language} translation in {mo.relative_to(ROOT)} "
        f"(add them to its django.po, then `manage.py compilemessages`): {missing}"
    )
