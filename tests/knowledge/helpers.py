"""Test helpers for knowledge: PDFs written byte by byte."""

import io

# What the test PDFs say, one line each.
BACKUP_POLICY = [
    "The backup service keeps every nightly copy for ninety days.",
    "Restores are tested every month by the operations team.",
    "Each restore test is written down in the service log.",
]

# Word gaps in thousandths of an em (12 pt Helvetica) and how each extractor reads them
# (pdfplumber 0.11, pypdf 7): pdfplumber joins letters closer than its x_tolerance of
# 3 pt; pypdf reads a TJ offset past its own threshold (about 0.13 em) as a space.
GAP_BOTH_GLUED = 100  # 1.2 pt: pdfplumber and pypdf both glue
GAP_PRIMARY_GLUED = 200  # 2.4 pt: pdfplumber glues, pypdf puts spaces
GAP_BOTH_CLEAN = 400  # 4.8 pt: both put spaces


def kerned_pdf(lines: list[str], *, gap: int, size: int = 12) -> bytes:
    """A one-page PDF (Helvetica, no font embedded) whose words are placed apart by TJ
    kerning offsets of `gap` thousandths of an em, with no space character between them,
    as some typesetting tools write justified text."""
    text = [b"BT /F1 %d Tf 72 720 Td %d TL" % (size, size + 4)]
    for number, line in enumerate(lines):
        words = b" ".join(b"(%s) %d" % (word.encode("latin-1"), -gap) for word in line.split())
        text.append((b"T* " if number else b"") + b"[" + words + b"] TJ")
    text.append(b"ET")
    content = b"\n".join(text)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()
