"""Text extraction: both readings of every format, located segments, and every error code.

Every fixture is built here in code; nothing touches the database.
"""

import io
import pickle
import re
import struct
import subprocess
import sys
import zlib

import docx
import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from knowledge.extraction import ExtractionError, ExtractionResult, detect_format, extract
from knowledge.extraction.base import normalise_text

ROLES = ("primary", "secondary")
GUIDE_LAPTOPS = ["Onboarding Guide", "Laptops"]
EXPECTED_EXTRACTORS = {
    "pdf": ("pdfplumber", "pypdf"),
    "docx": ("python-docx", "docx2txt"),
    "html": ("beautifulsoup4", "lxml"),
    "markdown": ("markdown-it-py", "mistune"),
    "text": ("python-codecs", "charset-normalizer"),
    "vtt": ("webvtt-py", "koinon-cue-parser"),
    "srt": ("webvtt-py", "koinon-cue-parser"),
}

HTML = """<!DOCTYPE html><html><head><title>Handbook</title>
<style>p { color: red }</style><script>var secret = "scriptword";</script></head>
<body><!-- a comment --><h1>Onboarding <em>Guide</em></h1>
<p>Welcome to the <b>team</b> &amp; company.<br>Second line here.</p>
<noscript>noscriptword</noscript><template><p>templateword</p></template>
<h2>Laptops</h2><ul><li>Ask IT for a laptop</li><li>Install the <a href="/vpn">VPN</a></li></ul>
<h3>Passwords</h3><p>Use a password manager.</p>
<h2>Holidays</h2><div>Twenty five days<p>per year</p></div>
<pre>  def f():
      return 1</pre></body></html>"""

MARKDOWN = """# Onboarding Guide
Welcome to the **team** &amp; *company*, see [the wiki](http://wiki).
Second line with `inline code`.
## Laptops
- Ask IT for a laptop
- Install the ~~old~~ VPN
### Passwords
> Use a password manager.
## Holidays

| Kind | Days |
|------|------|
| Paid | 25 |

```python
def holidays():
    return 25
```
"""

VTT = """WEBVTT

NOTE this is a comment

00:01.000 --> 00:04.000
Welcome to the <b>meeting</b>

intro
00:00:05.000 --> 00:00:08.500 align:start
<v Alice>Budgets are due &amp; approved
on Friday
"""

SRT = """1
00:00:01,000 --> 00:00:04,000
Welcome to the <i>meeting</i>

2
00:00:05,000 --> 00:00:08,500
Budgets are due on Friday
"""

TEXT = "Quarterly report   \r\nRevenue grew.\r\n\r\n\r\n\r\n\r\nCosts fell in the café."


def _pdf(*pages: str) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica")
    for content in pages:
        pdf.add_page()
        if content:
            pdf.multi_cell(0, 10, content)
    return bytes(pdf.output())


def _png() -> bytes:
    def chunk(kind: bytes, payload: bytes) -> bytes:
        crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    pixels = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    idat = zlib.compress(pixels)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def _image_only_pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.image(io.BytesIO(_png()), x=10, y=10, w=50)
    return bytes(pdf.output())


def _encrypted_pdf(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf("Confidential figures"))))
    writer.encrypt(user_password=user_password, owner_password="owner-secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _docx(*, with_text: bool = True) -> bytes:
    document = docx.Document()
    sections = [(1, "Onboarding Guide", "Welcome."), (2, "Laptops", "Ask IT for a laptop.")]
    for level, heading, body in sections if with_text else []:
        document.add_heading(heading, level=level)
        document.add_paragraph(body)
    if with_text:
        document.add_table(rows=1, cols=2).cell(0, 1).text = "ThinkPad"
        document.add_heading("Holidays", level=1)
        document.add_paragraph("Twenty five days.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _samples() -> dict[str, bytes]:
    return {
        "pdf": _pdf("Page one talks about budgets.", "Page two covers holidays."),
        "docx": _docx(),
        "html": HTML.encode(),
        "markdown": MARKDOWN.encode(),
        "text": TEXT.encode(),
        "vtt": VTT.encode(),
        "srt": SRT.encode(),
    }


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _slices(result: ExtractionResult) -> list[str]:
    return [result.text[s.char_start : s.char_end] for s in result.segments]


def _located(result: ExtractionResult) -> dict[str, dict]:
    return {result.text[s.char_start : s.char_end]: s.locator for s in result.segments}


def assert_segments_slice_text(result: ExtractionResult) -> None:
    """Segments are in order, in bounds, non-overlapping, and cover every non-blank character."""
    text = result.text
    assert text and normalise_text(text) == text
    position = 0
    for segment in result.segments:
        assert position <= segment.char_start < segment.char_end <= len(text)
        assert text[position : segment.char_start].strip() == ""
        piece = text[segment.char_start : segment.char_end]
        assert piece.strip() and piece == piece.strip("\n")
        assert isinstance(segment.locator, dict)
        position = segment.char_end
    assert text[position:].strip() == ""


def _error(fmt: str, data: bytes, role: str = "primary", **limits: int) -> ExtractionError:
    with pytest.raises(ExtractionError) as caught:
        extract(fmt, data, role=role, **limits)
    return caught.value


@pytest.mark.parametrize("fmt", EXPECTED_EXTRACTORS)
def test_primary_and_secondary_use_different_libraries(fmt):
    data = _samples()[fmt]
    primary = extract(fmt, data, role="primary")
    secondary = extract(fmt, data, role="secondary")
    assert (primary.extractor, secondary.extractor) == EXPECTED_EXTRACTORS[fmt]
    assert primary.extractor != secondary.extractor
    assert primary.extractor_version and secondary.extractor_version


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("fmt", EXPECTED_EXTRACTORS)
def test_segments_slice_the_final_text_exactly(fmt, role):
    assert_segments_slice_text(extract(fmt, _samples()[fmt], role=role))


@pytest.mark.parametrize("fmt", EXPECTED_EXTRACTORS)
def test_both_roles_read_the_same_words_in_the_same_order(fmt):
    data = _samples()[fmt]
    primary = extract(fmt, data, role="primary")
    secondary = extract(fmt, data, role="secondary")
    assert _words(primary.text) == _words(secondary.text)
    assert len(_words(primary.text)) >= 5


@pytest.mark.parametrize("fmt", EXPECTED_EXTRACTORS)
def test_detect_format_accepts_matching_name_and_content(fmt):
    filename = {"markdown": "dir/README.md", "text": "notes.txt", "html": "page.htm"}.get(fmt)
    assert detect_format(filename or f"Report.{fmt.upper()}", _samples()[fmt]) == fmt


@pytest.mark.parametrize("role", ROLES)
def test_pdf_locators_give_one_based_page_numbers_and_skip_empty_pages(role):
    result = extract("pdf", _pdf("First page", "", "Third page"), role=role)
    assert [s.locator for s in result.segments] == [{"page": 1}, {"page": 3}]
    assert _slices(result) == ["First page", "Third page"]
    assert result.text == "First page\n\nThird page"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("fmt", ["vtt", "srt"])
def test_transcript_segments_carry_cue_start_and_end(fmt, role):
    result = extract(fmt, _samples()[fmt], role=role)
    assert [s.locator for s in result.segments] == [
        {"start": "00:00:01.000", "end": "00:00:04.000"},
        {"start": "00:00:05.000", "end": "00:00:08.500"},
    ]
    assert _slices(result)[0] == "Welcome to the meeting"
    assert "<" not in result.text and "&amp;" not in result.text


@pytest.mark.parametrize("role", ROLES)
def test_html_drops_scripts_and_styles_and_gives_heading_paths(role):
    result = extract("html", HTML.encode(), role=role)
    for hidden in ("scriptword", "color", "noscriptword", "templateword", "comment"):
        assert hidden not in result.text
    located = _located(result)
    assert located["Onboarding Guide"] == {"headings": ["Onboarding Guide"]}
    assert located["Use a password manager."] == {"headings": [*GUIDE_LAPTOPS, "Passwords"]}
    assert located["per year"] == {"headings": ["Onboarding Guide", "Holidays"]}
    assert located["Ask IT for a laptop"] == {"headings": GUIDE_LAPTOPS, "block": "item"}
    assert "Welcome to the team & company.\nSecond line here." in located
    assert "  def f():\n      return 1" in result.text


@pytest.mark.parametrize("role", ROLES)
def test_markdown_renders_plain_text_with_heading_paths(role):
    result = extract("markdown", MARKDOWN.encode(), role=role)
    assert not set("*#`[]|>~") & set(result.text.replace("def holidays():", ""))
    located = _located(result)
    assert located["Install the old VPN"] == {"headings": GUIDE_LAPTOPS, "block": "item"}
    assert located["Use a password manager."] == {"headings": [*GUIDE_LAPTOPS, "Passwords"]}
    holidays = ["Onboarding Guide", "Holidays"]
    cell = {"headings": holidays, "block": "cell", "table": 1}
    assert located["Kind"] == {**cell, "row": 1, "header": True}
    assert located["Paid"] == {**cell, "row": 2, "header": False}
    code = located["def holidays():\n    return 25"]
    assert code == {"headings": ["Onboarding Guide", "Holidays"]}
    assert "Welcome to the team & company, see the wiki." in result.text


def test_docx_heading_styles_give_heading_paths():
    result = extract("docx", _docx(), role="primary")
    located = _located(result)
    assert located["Ask IT for a laptop."] == {"headings": GUIDE_LAPTOPS}
    cell = {"block": "cell", "table": 1, "row": 1, "header": True}  # a first row is the header
    assert located["ThinkPad"] == {"headings": GUIDE_LAPTOPS, **cell}
    assert located["Twenty five days."] == {"headings": ["Holidays"]}


@pytest.mark.parametrize("role", ROLES)
def test_text_is_normalised(role):
    result = extract("text", TEXT.encode(), role=role)
    assert result.text == "Quarterly report\nRevenue grew.\n\nCosts fell in the café."
    decomposed = "Cafe\u0301 au lait\r\n".encode()
    assert extract("text", decomposed, role=role).text == "Café au lait"


CHANGELOG = (
    "Read this first.\n\n"
    "=========\nChangelog\n=========\n\n"
    "widgetlib 2.1\n-------------\n\n*Release date: 8 March 2021*\n\n- Fix the parser.\n\n\n"
    "widgetlib 2.0\n-------------\nThe first stable release.\n\n"
    "Notes\n~~~~~\n\nNothing else changed.\n\n"
    "The parser was rewritten.\n------------------------------\n\n"
    "Short rule under a long title line\n---\n"
)


@pytest.mark.parametrize("role", ROLES)
def test_plain_text_underlined_titles_give_heading_paths(role):
    # Underlined (or over- and underlined) as reStructuredText and Markdown write a title
    # in plain text: the title is a piece of its own without its rules, and what follows
    # it carries it, one level per style in order of appearance.
    result = extract("text", CHANGELOG.encode(), role=role)
    located = _located(result)
    assert located["Read this first."] == {}  # before the first title: no heading path
    assert located["Changelog"] == {"headings": ["Changelog"]}
    release = ["Changelog", "widgetlib 2.1"]
    assert located["widgetlib 2.1"] == {"headings": release}
    assert located["*Release date: 8 March 2021*"] == {"headings": release}
    assert located["- Fix the parser."] == {"headings": release}
    # A title and its text in one paragraph: two pieces.
    assert located["The first stable release."] == {"headings": ["Changelog", "widgetlib 2.0"]}
    assert located["Nothing else changed."] == {"headings": ["Changelog", "widgetlib 2.0", "Notes"]}
    assert "=" not in result.text and "widgetlib 2.1\n-" not in result.text
    # A sentence over a rule, and a rule shorter than the line above it, are no titles.
    under_notes = {"headings": ["Changelog", "widgetlib 2.0", "Notes"]}
    assert located["The parser was rewritten.\n------------------------------"] == under_notes
    assert located["Short rule under a long title line\n---"] == under_notes
    assert_segments_slice_text(result)


@pytest.mark.parametrize("role", ROLES)
def test_plain_text_markdown_titles_alone_on_their_line_give_heading_paths(role):
    text = (
        "Intro line.\n\n# Install\n\nRun the installer.\n\n## Options ##\n\nUse --fast.\n\n"
        "# a comment\nls -la\n\n#not a title\n\n# Done.\n"
    )
    located = _located(extract("text", text.encode(), role=role))
    assert located["Intro line."] == {}
    assert located["Install"] == {"headings": ["Install"]}
    assert located["Run the installer."] == {"headings": ["Install"]}
    options = {"headings": ["Install", "Options"]}
    assert located["Options"] == located["Use --fast."] == options
    # A "#" line over other lines (a comment), without a space, or a sentence: no title.
    assert located["# a comment\nls -la"] == located["#not a title"] == options
    assert located["# Done."] == options


def test_text_falls_back_to_a_guessed_legacy_encoding():
    data = ("Le café du matin est servi à huit heures. " * 5).encode("cp1252")
    result = extract("text", data, role="primary")
    assert "\ufffd" not in result.text and result.text.startswith("Le caf")
    assert extract("text", b"\xef\xbb\xbfWith BOM", role="primary").text == "With BOM"


@pytest.mark.parametrize("role", ROLES)
def test_valid_utf8_with_a_rare_mark_reads_as_utf8_in_both_roles(role):
    # One left-to-right mark in a Wikipedia paragraph: charset_normalizer's best guess for
    # it alone was Mac Icelandic ("Urdu: ‚Äé"), so no quote with the mark was in both readings.
    text = (
        "Pumari Chhish (Urdu: \u200e ), (or Pumarikish, Peak 11) is a high peak of the Hispar "
        "Muztagh, a subrange of the Karakoram range."
    )
    assert extract("text", text.encode(), role=role).text == text
    # A legacy encoding is still guessed in both.
    legacy = ("Le café du matin est servi à huit heures. " * 5).encode("cp1252")
    assert extract("text", legacy, role=role).text.startswith("Le café du matin")


@pytest.mark.parametrize("role", ROLES)
def test_encrypted_pdf_is_reported_as_encrypted_unless_only_owner_protected(role):
    assert _error("pdf", _encrypted_pdf("user-secret"), role).code == "encrypted"
    assert extract("pdf", _encrypted_pdf(""), role=role).text == "Confidential figures"


@pytest.mark.parametrize("role", ROLES)
def test_corrupt_pdf_and_truncated_docx_are_reported_as_corrupt(role):
    assert _error("pdf", b"%PDF-1.7\n1 0 obj << /Broken", role).code == "corrupt"
    assert _error("pdf", _pdf("Some text")[:300], role).code == "corrupt"
    assert _error("docx", _docx()[:2000], role).code == "corrupt"


@pytest.mark.parametrize("role", ROLES)
def test_image_only_pdf_and_empty_docx_have_no_text(role):
    assert _error("pdf", _image_only_pdf(), role).code == "no_text"
    assert _error("docx", _docx(with_text=False), role).code == "no_text"


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_whitespace_only_document_has_no_text(fmt, role):
    assert _error(fmt, b"  \n\t\r\n   \n", role).code == "no_text"
    assert _error("html", b"<script>x()</script><p> </p>", role).code == "no_text"


@pytest.mark.parametrize("role", ROLES)
def test_too_many_pages_or_characters_is_too_large(role):
    pdf = _pdf("one", "two", "three")
    assert _error("pdf", pdf, role, max_pages=2).code == "too_large"
    assert extract("pdf", pdf, role=role, max_pages=3).segments[-1].locator == {"page": 3}
    assert _error("text", b"x" * 101, role, max_chars=100).code == "too_large"
    assert _error("markdown", MARKDOWN.encode(), role, max_chars=20).code == "too_large"
    assert extract("text", b"x" * 100, role=role, max_chars=100).text == "x" * 100


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("report.pdf", b"This is plain text pretending to be a PDF."),
        ("photo.txt", _png()),
        ("image.md", b"\xff\xd8\xff\xe0\x00\x10JFIF"),
        ("binary.txt", b"abc\x00\x01\x02def"),
        ("page.html", b"\x80\x81\xfe\x00\xff"),
        ("archive.docx", b"PK\x03\x04not really a zip"),
        ("setup.exe", b"MZ\x90\x00"),
        ("no_extension", b"hello"),
        ("captions.vtt", b"00:00:01.000 --> 00:00:02.000\nNo header\n"),
        ("subtitles.srt", b"Just some text without cue timings.\n"),
    ],
)
def test_detect_format_rejects_unsupported_or_mismatched_content(filename, data):
    with pytest.raises(ExtractionError) as caught:
        detect_format(filename, data)
    assert caught.value.code == "unsupported_type"


def test_extract_refuses_unknown_formats_and_roles():
    assert _error("exe", b"MZ").code == "unsupported_type"
    with pytest.raises(ValueError):
        extract("text", b"hello", role="tertiary")


def test_error_messages_contain_no_path_or_library_text():
    errors = [
        _error("pdf", b"%PDF-1.7 garbage"),
        _error("pdf", b"%PDF-1.7 garbage", "secondary"),
        _error("docx", b"PK\x03\x04junk"),
        _error("pdf", _encrypted_pdf("user-secret")),
        _error("vtt", b"WEBVTT\n\n00:00:99.000 --> 00:00:01.000\nbad time\n"),
        _error("vtt", b"no header\n", "secondary"),
    ]
    for error in errors:
        assert type(error) is ExtractionError and str(error) == error.message
        assert pickle.loads(pickle.dumps(error)).code == error.code  # noqa: S301 (own object)
        assert "/" not in error.message and "\\" not in error.message
        for leak in ("pdfminer", "pypdf", "zip", "Error", "Exception", "EOF", "/Root"):
            assert leak not in error.message
        cause = error.__cause__
        if cause is not None and str(cause):
            assert str(cause) not in error.message


def test_package_imports_without_django_configured():
    code = "import sys, knowledge.extraction; assert 'django' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
