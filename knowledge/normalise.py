"""The one definition of "the same words" used to verify quotations (SPEC §1.5)."""

import re
import unicodedata

_WORD = re.compile(r"\w+")
# Invisible format characters (zero-width spaces and joiners, bidi controls, the BOM):
# one extractor keeps them and another drops them, and neither changes the words shown.
_FORMAT = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


def normalised_words(text: str) -> list[str]:
    """Words after NFKC and case folding; punctuation, whitespace and invisible format
    characters are dropped."""
    return _WORD.findall(_FORMAT.sub("", unicodedata.normalize("NFKC", text)).casefold())


def normalised_key(text: str) -> str:
    """Words joined by single spaces and framed by spaces, so that a substring
    search on keys matches whole words only: " b c " is in " a b c d ", " b c" + "x" is not."""
    words = normalised_words(text)
    return f" {' '.join(words)} " if words else ""
