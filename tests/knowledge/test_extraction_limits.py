"""Extraction resource limits: inflation, element counts, memory, time, request bodies."""

import io
import socket
import zipfile
import zlib
from urllib.parse import urlparse

import pytest

from knowledge.documents.extraction import revision_extract
from knowledge.documents.upload import document_upload
from knowledge.models import Extraction
from tests.guards import no_hang
from tests.knowledge.test_documents import docx_bytes, pdf_bytes

pytestmark = pytest.mark.django_db


def docx_with_empty_paragraphs(count: int) -> bytes:
    """A real DOCX whose body holds `count` empty paragraphs after one with text."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes(["The only text."])))
    head, tail = source.read("word/document.xml").split(b"<w:body>", 1)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                target.writestr(item, source.read(item.filename))
        with target.open("word/document.xml", "w") as body:
            body.write(head + b"<w:body>")
            for _ in range(count // 100_000):
                body.write(b"<w:p/>" * 100_000)
            body.write(tail)
    return out.getvalue()


def pdf_with_one_stream(inflated: int) -> bytes:
    """A one-page PDF whose content stream inflates to `inflated` bytes."""
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(b"BT /F1 12 Tf 72 720 Td (Hello from a bomb.) Tj ET\n")]
    filler = b" " * (1024 * 1024)
    parts += [deflater.compress(filler) for _ in range(inflated // len(filler))]
    stream = b"".join([*parts, deflater.flush()])
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def extract_upload(owner, space, filename: str, data: bytes) -> dict[str, tuple[str, str]]:
    result = document_upload(user=owner, filename=filename, data=data, space=space)
    revision_extract(revision_id=result.revision.pk)
    return {
        e.role: (e.status, e.error_code)
        for e in Extraction.objects.filter(revision=result.revision)
    }


def test_a_docx_of_eight_million_empty_paragraphs_is_too_large_not_a_memory_hog(space, owner):
    data = docx_with_empty_paragraphs(8_000_000)
    assert len(data) < 200_000  # what the review sent: ~100 KB
    with no_hang():
        outcome = extract_upload(owner, space, "bomb.docx", data)
    assert outcome == {"primary": ("failed", "too_large"), "secondary": ("failed", "too_large")}


@pytest.mark.parametrize("isolation", ["forkserver", "spawn"])
def test_extraction_runs_under_a_memory_limit(space, owner, settings, isolation):
    settings.KOINON_EXTRACT_ISOLATION = isolation
    # With the element count check lifted, the address-space limit of the child stops it.
    settings.KOINON_EXTRACT_MAX_ELEMENTS = 10**9
    settings.KOINON_EXTRACT_MEMORY_BYTES = 256 * 1024 * 1024
    outcome = extract_upload(owner, space, "bomb.docx", docx_with_empty_paragraphs(3_000_000))
    assert outcome == {"primary": ("failed", "too_large"), "secondary": ("failed", "too_large")}


def test_a_small_pdf_with_a_300_mb_stream_is_too_large_for_both_extractors(space, owner):
    data = pdf_with_one_stream(300 * 1024 * 1024)
    assert len(data) < 400_000
    outcome = extract_upload(owner, space, "bomb.pdf", data)
    assert outcome == {"primary": ("failed", "too_large"), "secondary": ("failed", "too_large")}
    # The same file with a stream of 1 MB is an ordinary PDF.
    outcome = extract_upload(owner, space, "fine.pdf", pdf_with_one_stream(1024 * 1024))
    assert outcome == {"primary": ("admitted", ""), "secondary": ("admitted", "")}


@pytest.mark.parametrize("isolation", ["forkserver", "spawn"])
def test_an_extraction_past_its_time_limit_fails_with_timeout(space, owner, settings, isolation):
    settings.KOINON_EXTRACT_ISOLATION = isolation
    # Far below what parsing 400 pages takes (or starting an interpreter), on any machine.
    settings.KOINON_EXTRACT_TIMEOUT = 0.001
    pages = [f"Page {n} of a long report about nothing in particular." for n in range(400)]
    outcome = extract_upload(owner, space, "long.pdf", pdf_bytes(pages))
    assert outcome == {"primary": ("failed", "timeout"), "secondary": ("failed", "timeout")}


def test_a_request_declaring_a_huge_body_is_refused_before_it_is_read(live_server_url):
    address = urlparse(live_server_url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as client:
        client.sendall(
            b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\n"
            b"Content-Length: 1073741824\r\n\r\n"
        )
        answer = client.recv(4096)  # the socket's timeout guards against a hang
    # Refused from the header alone: the gigabyte was never sent.
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"code": "too_large"' in answer
