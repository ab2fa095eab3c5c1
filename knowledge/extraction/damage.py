"""How damaged an extracted text is: the share of its words that look glued together.

Some PDFs place words with kerning offsets instead of space characters; one extractor
then reads "Thebackupservicekeepseverynightlycopy" where the other reads the sentence.
Quotes cut from such text are unreadable, so each admitted extraction records this
measure, and a damaged primary gives way to a clean secondary (knowledge.documents.extraction).

The measure, deterministic and pure (no Django, no dictionary, no language model):

- The text is split at white space into tokens; punctuation at either end is dropped.
- Only letters of cased scripts (Latin, Greek, Cyrillic …: `ch.lower() != ch.upper()`)
  are counted. Scripts written without spaces or without case (Japanese, Chinese, Thai,
  Arabic …) carry no sign of a missing space that these rules could see, and numbers
  carry none at all: such tokens are left out, neither clean nor damaged.
- Tokens that look like URLs, e-mail addresses, paths or code (`://`, `@`, `/`, `\\`,
  `_`, brackets, operators) are left out too: an identifier is long and joined on
  purpose, and a document full of them is not damaged.
- A token is glued when
  1. one of its words has LONG_WORD letters or more. A token's words are its runs of
     letters, split also where the case turns from lower to upper ("getElementById" is
     get/Element/By/Id, "HTMLParser" is HTML/Parser), so that identifiers in prose stay
     short. Twenty-five letters is past the words of the languages koinon answers in
     (English tops out near twenty: "internationalization"); only the rare German
     compound reaches it ("Informationssicherheitsbeauftragte"), which the threshold
     absorbs. Five glued words of prose reach it, and a line glued whole far exceeds it.
  2. or a comma or semicolon sits between two lower-case letters ("files,and"): prose
     puts a space after them, and code that does not is already left out by its brackets.
  A lower-to-upper join on its own ("theFiles") is *not* counted: it has the shape of
  "getFiles", and counting it would make every API reference look damaged. Glued prose
  shows itself anyway through its long lower-case runs, since most words are lower case.
- The result is the share of the counted letters that sit in glued tokens, from 0.0 to
  1.0: weighing by letters lets a run of ten glued words weigh what the ten words would.
  A text with nothing to count (empty, only numbers or code) measures 0.0.

Known blind spots: two short glued words ("ofthe") look like one word; glued Title Case
("TheBackupService") splits like an identifier. Both only make the figure lower.
"""

from __future__ import annotations

import re

LONG_WORD = 25

# Any of these in a token makes it a URL, address, path or piece of code.
_CODE_MARKS = frozenset("_/\\@()[]{}<>=#$%&*+|~^`")
_JOINS = frozenset(",;")
_LETTERS = re.compile(r"[^\W\d_]+")


def _cased(char: str) -> bool:
    return char.isalpha() and char.lower() != char.upper()


def _strip(token: str) -> str:
    """The token without punctuation at either end (letters and digits stay)."""
    start, end = 0, len(token)
    while start < end and not token[start].isalnum():
        start += 1
    while end > start and not token[end - 1].isalnum():
        end -= 1
    return token[start:end]


def _looks_like_code(token: str) -> bool:
    return "://" in token or "::" in token or "->" in token or not _CODE_MARKS.isdisjoint(token)


def _longest_word(run: str) -> int:
    """The most letters of one word in a run of cased letters, splitting at case humps."""
    longest = start = 0
    for i in range(1, len(run)):
        camel = run[i - 1].islower() and run[i].isupper()
        # "HTMLParser": a capital followed by a lower-case letter starts the next word.
        acronym = run[i - 1].isupper() and run[i].isupper() and run[i + 1 : i + 2].islower()
        if camel or acronym:
            longest = max(longest, i - start)
            start = i
    return max(longest, len(run) - start)


def _runs(token: str) -> list[str]:
    """The token's maximal runs of cased letters."""
    runs = []
    for letters in _LETTERS.findall(token):
        if letters.isascii():  # every ASCII letter is cased: the common case, no loop
            runs.append(letters)
            continue
        current: list[str] = []
        for char in letters:
            if _cased(char):
                current.append(char)
            elif current:
                runs.append("".join(current))
                current = []
        if current:
            runs.append("".join(current))
    return runs


def _joined_at_punctuation(token: str) -> bool:
    if _JOINS.isdisjoint(token):
        return False
    return any(
        token[i] in _JOINS and token[i - 1].islower() and token[i + 1].islower()
        for i in range(1, len(token) - 1)
    )


def extraction_damage(text: str) -> float:
    """The share (0.0–1.0) of the text's letters that sit in tokens that look glued.

    See the module docstring for the rules and why each one is there.
    """
    counted = glued = 0
    for raw in text.split():
        token = _strip(raw)
        if not token or _looks_like_code(token):
            continue
        runs = _runs(token)
        letters = sum(len(run) for run in runs)
        if not letters:
            continue
        counted += letters
        # Only a run of LONG_WORD letters can hold a word that long: skip the split otherwise.
        if _joined_at_punctuation(token) or any(
            len(run) >= LONG_WORD and _longest_word(run) >= LONG_WORD for run in runs
        ):
            glued += letters
    return glued / counted if counted else 0.0


def extraction_is_damaged(damage: float | None, *, threshold: float) -> bool:
    """Whether a recorded damage figure is past the threshold; None (not measured) is not."""
    return damage is not None and damage > threshold


def serving_role(damages: dict[str, float | None], *, threshold: float) -> str | None:
    """Which admitted reading passages (and so quotes) are cut from.

    `damages` maps each admitted role to its damage. The primary serves, unless it is
    damaged and the secondary is admitted and clean. Without an admitted primary nothing
    serves: quotes from the secondary alone would have no second reading to be checked
    against (SPEC §1.5 b).
    """
    if "primary" not in damages:
        return None
    if (
        extraction_is_damaged(damages["primary"], threshold=threshold)
        and "secondary" in damages
        and not extraction_is_damaged(damages["secondary"], threshold=threshold)
    ):
        return "secondary"
    return "primary"
