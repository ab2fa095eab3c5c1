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


# A printed handbook, line by line as typeset: numbered headings, words hyphenated at line
# ends ("man-" / "agement") next to real compounds ("end-to-" / "end", "well-known"), and
# a sentence that runs on over the page break. `furnished_pdf` adds the page's furniture.
HANDBOOK_PAGES = [
    [
        "1 Introduction",
        "This handbook describes how the operations team runs the platform. Its man-",
        "agement of backups and restores is described in the second section. The",
        "end-to-",
        "end tests of the platform run every night and report to the on-call engineer.",
        "1.1 Scope",
        "The handbook covers every service that the operations team deploys. Services",
        "that other teams run are documented in their own well-known places.",
    ],
    [
        "2",
        "Backups",
        "The backup service keeps every nightly copy for ninety days. Restores are test-",
        "ed every month by the operations team, and each restore test is written down",
        "in the service log together with the time it took.",
        "2.1 Retention",
        "Copies older than ninety days are deleted automatically unless a legal hold is",
        "set. A well-known exception is the yearly archive, which is kept for ten years",
        "and stored in a separate, offline loca-",
    ],
    [
        "tion that only two people can reach.",
        "3 Incidents",
        "Every incident gets a written review within five working days. The review",
        "names the cause, the fix and the follow-up work, and it is shared with every",
        "team that was affected by the outage.",
    ],
]
HANDBOOK_HEADER = ("Operations Handbook", "Version 3")


def furnished_pdf(
    pages: list[list[str]],
    *,
    header: tuple[str, str] | None = HANDBOOK_HEADER,
    footer: str = "Page {page} of {pages}",
    page_number: bool = True,
    alternate_header: str | None = None,
) -> bytes:
    """A PDF (fpdf2, Helvetica) with the given lines of each page as typeset, under a
    running header (left and right text; `alternate_header` on even pages instead) and
    over a footer ("{page}", "{pages}" filled in) and a bare page number."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for number, lines in enumerate(pages, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", size=9)
        if alternate_header and number % 2 == 0:
            pdf.text(20, 12, alternate_header)
        elif header:
            pdf.text(20, 12, header[0])
            pdf.text(160, 12, header[1])
        pdf.set_font("Helvetica", size=11)
        for row, line in enumerate(lines):
            pdf.text(20, 30 + 6 * row, line)
        pdf.set_font("Helvetica", size=9)
        if footer:
            pdf.text(20, 285, footer.format(page=number, pages=len(pages)))
        if page_number:
            pdf.text(105, 285, str(number))
    return bytes(pdf.output())


# A report typeset like a LaTeX article: chapter title in the header of odd pages, the
# report's name on even ones, a bare page number at the foot, the section number set on a
# line of its own above its title, a numbered list, and a compound broken at its hyphen
# ("customer-" / "facing") whose parts the report also uses as words on their own.
REPORT_PAGES = [
    [
        "Quarterly Service Report",
        "1",
        "Summary",
        "The platform answered every request within its target during the quarter. Two",
        "planned maintenance windows were announced a week ahead, and the customer-",
        "facing status page showed both of them in time. Storage grew by a fifth, most",
        "of it in the document archive.",
    ],
    [
        "2",
        "Availability",
        "Measured availability was above the agreed level in every month. The only",
        "interruption came from a certificate that expired on a Sunday; its renewal is",
        "now checked automatically, and an alert reaches the on-call engineer four",
        "weeks ahead. The monitoring configu-",
        "ration is reviewed at the start of every quarter.",
        "2.1 Follow-up work",
        "1. Renew every certificate through the automated job.",
        "2. Move the archive to the new storage cluster before the summer.",
    ],
    [
        "3",
        "Costs",
        "Hosting costs rose in line with storage. The largest single item remains the",
        "archive, whose cold tier will be priced again when the contract is re-",
        "newed in the spring. Staff costs did not change, and every customer pays the",
        "same rate as before.",
    ],
    [
        "4",
        "Outlook",
        "The group facing the largest change is the storage team, which moves the archive",
        "in the spring. No other service is expected to change before the next report.",
    ],
]
REPORT_RUNNING_TITLE = "Quarterly Service Report: Platform Operations"


def report_pdf() -> bytes:
    """REPORT_PAGES with its running headers (alternating) and bare page numbers."""
    return furnished_pdf(
        REPORT_PAGES,
        header=("Platform Operations", "Q3"),
        footer="",
        alternate_header=REPORT_RUNNING_TITLE,
    )
