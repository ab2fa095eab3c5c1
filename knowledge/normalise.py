"""The one definition of "the same words" used to verify quotations (SPEC §1.5)."""

import re
import unicodedata

_WORD = re.compile(r"\w+")


def normalised_words(text: str) -> list[str]:
    """Words after NFKC and case folding; punctuation and whitespace are dropped."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def normalised_key(text: str) -> str:
    """Words joined by single spaces and framed by spaces, so that a substring
    search on keys matches whole words only: " b c " is in " a b c d ", " b c" + "x" is not."""
    words = normalised_words(text)
    return f" {' '.join(words)} " if words else ""
