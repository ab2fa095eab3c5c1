"""PDF: pdfplumber (pdfminer.six underneath) as primary, pypdf as an independent second reading.

A PDF counts as "encrypted" when it cannot be opened with the empty password:
owner-password-only files (printing/copying restrictions) open for both
libraries and are extracted normally.
"""

from __future__ import annotations

import io

from .base import ExtractionError, ExtractionResult, Limits, TextBuilder, dist_version


def _is_password_error(exc: BaseException) -> bool:
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    # pdfplumber wraps pdfminer's error as an argument, not as __cause__, so both are followed.
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, PDFPasswordIncorrect | PDFEncryptionError):
            return True
        pending.extend(arg for arg in current.args if isinstance(arg, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def _check_pages(count: int, limits: Limits) -> None:
    if count == 0:
        raise ExtractionError("corrupt")
    if count > limits.max_pages:
        raise ExtractionError("too_large")


def extract_primary(data: bytes, limits: Limits) -> ExtractionResult:
    import pdfplumber

    builder = TextBuilder(limits)
    try:
        pdf = pdfplumber.open(io.BytesIO(data))
    except Exception as exc:
        raise ExtractionError("encrypted" if _is_password_error(exc) else "corrupt") from exc
    with pdf:
        _check_pages(len(pdf.pages), limits)
        for number, page in enumerate(pdf.pages, start=1):
            builder.add(page.extract_text() or "", {"page": number})
            # Cached layout objects of every page would otherwise stay in memory.
            page.close()
    return builder.result("pdfplumber", dist_version("pdfplumber"))


def extract_secondary(data: bytes, limits: Limits) -> ExtractionResult:
    from pypdf import PasswordType, PdfReader

    builder = TextBuilder(limits)
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
        except Exception as exc:
            raise ExtractionError("encrypted") from exc
        if not opened:
            raise ExtractionError("encrypted")
    _check_pages(len(reader.pages), limits)
    for number, page in enumerate(reader.pages, start=1):
        builder.add(page.extract_text() or "", {"page": number})
    return builder.result("pypdf", dist_version("pypdf"))
