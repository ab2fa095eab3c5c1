"""Structured quote units (knowledge.structure) over the real extractors' text: each shape
is one contiguous span of the serving reading whose words the other reading holds too,
and none crosses a heading."""

import io

import docx
import pytest

from knowledge.chunking import chunk
from knowledge.extraction import ROLES, extract
from knowledge.normalise import normalised_key
from knowledge.structure import Block, structured_units

HTML = (
    "<h1>Ferry</h1><p>Tickets are sold on board. Complaints can be sent to the following "
    "address:</p><ul><li>Ferry Office</li><li>12 Harbour Road</li></ul>"
    "<h2>Settings</h2><dl><dt>upload_max_mb</dt><dd>Sets the largest file a person may "
    "upload, in megabytes.</dd></dl><table><thead><tr><th>Setting</th><th>Default</th></tr>"
    "</thead><tbody><tr><td>port</td><td>8080</td></tr><tr><th>timeout</th><td>30 s</td></tr>"
    "</tbody></table><p>Send questions to the following team:</p><h2>Team</h2><p>Ops.</p>"
)
HTML_UNITS = {
    (
        "lead_in",
        "Complaints can be sent to the following address:\n\nFerry Office\n\n12 Harbour Road",
    ),
    ("term", "upload_max_mb\n\nSets the largest file a person may upload, in megabytes."),
    ("row", "Setting\n\nDefault\n\nport\n\n8080"),  # the header just above the row
    ("row", "timeout\n\n30 s"),  # a row header cell does not make a header row
}
MARKDOWN = (
    "# Ferry\n\nNote the following:\n\n- Ferry Office\n- 12 Harbour Road\n\n## Limits\n\n"
    "**upload_max_mb**\n\nSets the largest file.\n\n## Next\n\nProse here. More prose.\n"
)
TEXT = (
    "Handbook\n\nSend complaints to the following address:\n- Ferry Office\n- 12 Harbour Road"
    "\n\nEmergency number\n\n0800 123 456\n\nIntroduction\n\nThis manual is long. It has "
    "many sentences.\n\nOverview\n\nContents\n"
)


def units_of(fmt: str, data: bytes, role: str, title: str = "") -> set[tuple[str, str]]:
    result = extract(fmt, data, role=role)
    other = extract(fmt, data, role="secondary" if role == "primary" else "primary")
    blocks = [
        Block(p.char_start, p.char_end, p.locator) for p in chunk(result.text, result.segments)
    ]
    found = structured_units(result.text, blocks, title=title)
    for unit in found:  # one span, inside the unit, and the words in the other reading
        assert unit.start <= unit.alone_start < unit.alone_end <= unit.end
        assert normalised_key(result.text[unit.start : unit.end]) in normalised_key(other.text)
    return {(u.kind, result.text[u.start : u.end]) for u in found}


@pytest.mark.parametrize("role", ROLES)
def test_html_lead_in_term_and_rows_are_units_and_none_crosses_a_heading(role):
    units = units_of("html", HTML.encode(), role)
    assert units == HTML_UNITS  # "the following team:" stands over a heading: no unit


@pytest.mark.parametrize("role", ROLES)
def test_markdown_lead_in_list_and_bold_label_are_units(role):
    units = units_of("markdown", MARKDOWN.encode(), role)
    assert units == {
        ("lead_in", "Note the following:\n\nFerry Office\n\n12 Harbour Road"),
        ("label", "upload_max_mb\n\nSets the largest file."),
    }


def test_docx_list_paragraphs_and_table_rows_are_units():
    document = docx.Document()
    document.add_heading("Ferry", 1)
    document.add_paragraph("Complaints can be sent to the following address:")
    document.add_paragraph("Ferry Office", style="List Bullet")
    document.add_paragraph("12 Harbour Road", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for row, cells in enumerate([("Setting", "Default"), ("port", "8080"), ("timeout", "30 s")]):
        for column, value in enumerate(cells):
            table.cell(row, column).text = value
    out = io.BytesIO()
    document.save(out)
    units = units_of("docx", out.getvalue(), "primary")
    assert units == {
        (
            "lead_in",
            "Complaints can be sent to the following address:\n\nFerry Office\n\n12 Harbour Road",
        ),
        ("row", "Setting\n\nDefault\n\nport\n\n8080"),
        ("row", "timeout\n\n30 s"),
    }


@pytest.mark.parametrize("role", ROLES)
def test_plain_text_lead_in_lines_and_label_value_but_no_heading_over_prose(role):
    units = units_of("text", TEXT.encode(), role, title="Handbook")
    assert units == {
        (
            "lead_in",
            "Send complaints to the following address:\n- Ferry Office\n- 12 Harbour Road",
        ),
        ("label", "Emergency number\n\n0800 123 456"),
    }  # "Introduction" over two sentences, "Overview" over "Contents": no unit


def test_a_lead_in_takes_a_bounded_number_of_items():
    items = "".join(f"- Item number {n} of the list\n" for n in range(1, 21))
    units = units_of("markdown", f"Pick one of the following:\n\n{items}".encode(), "primary")
    [(kind, unit)] = units
    assert kind == "lead_in" and unit.endswith("Item number 8 of the list")


def test_a_plain_title_over_a_sentence_of_prose_is_no_label_unit():
    text = (
        "Shipping guide\n\n"
        "Parcels leave the warehouse\nevery weekday at noon and reach\nmost cities the next day.\n"
    )
    assert units_of("text", text.encode(), "primary") == set()
    # The same layout with a name a label gives, or a short value, is one.
    named = "max_parcel_kg\n\nThe heaviest parcel the warehouse accepts, in kilograms.\n"
    assert units_of("text", named.encode(), "primary") == {("label", named.strip())}
