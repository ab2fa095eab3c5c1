"""Text extraction from uploaded documents, with an independent second reading.

`detect_format` decides what a file is from its name and its bytes; `extract`
turns it into normalised text plus located segments. Every format has a
"primary" extractor and a "secondary" one built on a different library, so a
later step can compare the two readings and distrust documents where they
disagree. Library failures never escape: they become `ExtractionError` with a
user-safe message and a stable `code`.

Pure Python and import-safe without Django settings. Each format's module imports its parser
libraries at its top, and this package imports that module on the format's first extraction:
a web process that only detects formats never loads a parser.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from billiard.exceptions import SoftTimeLimitExceeded

from .base import ERROR_CODES, ExtractionError, ExtractionResult, Limits, Segment, normalise_text
from .formats import FORMATS, SUPPORTED_TYPES, UPLOAD_ACCEPT, detect_format

__all__ = [
    "ERROR_CODES",
    "FORMATS",
    "ROLES",
    "SUPPORTED_TYPES",
    "UPLOAD_ACCEPT",
    "ExtractionError",
    "ExtractionResult",
    "Limits",
    "Segment",
    "detect_format",
    "extract",
    "normalise_text",
]

ROLES = ("primary", "secondary")

_Extractor = Callable[[bytes, Limits], ExtractionResult]

# (format, role) → (module of this package, its function, keyword arguments).
_EXTRACTORS: dict[tuple[str, str], tuple[str, str, dict[str, bool]]] = {
    ("pdf", "primary"): ("pdf", "extract_primary", {}),
    ("pdf", "secondary"): ("pdf", "extract_secondary", {}),
    ("docx", "primary"): ("docx", "extract_primary", {}),
    ("docx", "secondary"): ("docx", "extract_secondary", {}),
    ("html", "primary"): ("html", "extract_primary", {}),
    ("html", "secondary"): ("html", "extract_secondary", {}),
    ("markdown", "primary"): ("markdown", "extract_primary", {}),
    ("markdown", "secondary"): ("markdown", "extract_secondary", {}),
    ("text", "primary"): ("text", "extract_primary", {}),
    ("text", "secondary"): ("text", "extract_secondary", {}),
    ("vtt", "primary"): ("transcripts", "extract_webvtt", {"srt": False}),
    ("vtt", "secondary"): ("transcripts", "extract_cue_parser", {"srt": False}),
    ("srt", "primary"): ("transcripts", "extract_webvtt", {"srt": True}),
    ("srt", "secondary"): ("transcripts", "extract_cue_parser", {"srt": True}),
}


def _extractor(fmt: str, role: str) -> _Extractor | None:
    """The extractor of `fmt` for `role`, its module (and so its libraries) imported now."""
    entry = _EXTRACTORS.get((fmt, role))
    if entry is None:
        return None
    module, name, options = entry
    function = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return functools.partial(function, **options)


def extract(
    fmt: str,
    data: bytes,
    *,
    role: str,
    max_chars: int = 5_000_000,
    max_pages: int = 2000,
    max_decompressed: int = 256 * 1024 * 1024,
    max_elements: int = 2_000_000,
) -> ExtractionResult:
    """Extracts `data`, already detected as `fmt`, with the "primary" or "secondary" extractor.

    Raises ExtractionError with code corrupt, encrypted, no_text, too_large or
    unsupported_type. A wrong `role` is a programming error and raises ValueError.
    A task time limit (SoftTimeLimitExceeded) passes through untouched: it is the
    worker's, not the document's, and must not be recorded as `corrupt`.
    Run it through `knowledge.extraction.isolated` to bound time and memory.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    try:
        # Inside the try: a parser library that fails to import fails this reading alone.
        extractor = _extractor(fmt, role)
        if extractor is None:
            raise ExtractionError("unsupported_type")
        return extractor(
            data,
            Limits(
                max_chars=max_chars,
                max_pages=max_pages,
                max_decompressed=max_decompressed,
                max_elements=max_elements,
            ),
        )
    except (ExtractionError, SoftTimeLimitExceeded):
        raise
    except MemoryError as exc:
        raise ExtractionError("too_large") from exc
    except Exception as exc:
        # Parsers fail in countless library-specific ways on hostile or damaged
        # input; the cause stays chained for logs, the user sees only "corrupt".
        raise ExtractionError("corrupt") from exc
