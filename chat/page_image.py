"""A PDF page as a PNG with a quotation's lines marked (the source view, issue 29).

A stored PDF is untrusted input, as it was for extraction: the page is rendered in a child
process (`python -m chat.page_image`) that limits its own address space and is killed
after a timeout, never in the web process. The child finds each line of the quote on the
page with PDFium's text search (the positions the extraction itself does not keep) and
draws a translucent mark over the rectangles it finds; a line it cannot find is left
unmarked, and the page is still shown.

Protocol: one JSON header line on stdin (`page` from 1, `lines`, `width`, `memory_bytes`),
then the file's bytes; the PNG on stdout, or exit status 2 when the page does not exist
or the file cannot be read.
"""

from __future__ import annotations

import io
import json
import logging
import resource
import subprocess
import sys

logger = logging.getLogger(__name__)

WIDTH = 1000  # pixels across: readable on a laptop, a few hundred kB as PNG
MEMORY_BYTES = 768 * 1024 * 1024
TIMEOUT_SECONDS = 20
MARK = (255, 214, 0, 96)  # translucent yellow over the text
OUTLINE = (161, 92, 0, 255)
MIN_LINE_CHARS = 4  # shorter lines match anywhere on a page: not searched


class PageUnavailable(Exception):
    """The page could not be rendered: no such page, an unreadable file, or the child
    ran out of time or memory."""


def quote_lines(quote: str) -> list[str]:
    """The quote's lines as the page's text search can find them: each stripped line,
    long enough not to match by chance."""
    lines = [" ".join(line.split()) for line in quote.splitlines()]
    return [line for line in lines if len(line) >= MIN_LINE_CHARS]


def page_png(*, data: bytes, page: int, quote: str) -> bytes:
    """The page rendered with the quote's lines marked; PageUnavailable when it cannot be."""
    header = {
        "page": page,
        "lines": quote_lines(quote),
        "width": WIDTH,
        "memory_bytes": MEMORY_BYTES,
    }
    stdin = json.dumps(header).encode() + b"\n" + data
    try:
        done = subprocess.run(  # our own module, no shell, fixed arguments
            [sys.executable, "-m", "chat.page_image"],
            input=stdin,
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        logger.warning("rendering page %s took longer than %ss", page, TIMEOUT_SECONDS)
        raise PageUnavailable() from None
    if done.returncode != 0 or not done.stdout.startswith(b"\x89PNG"):
        if done.returncode != 2:
            logger.warning("rendering page %s failed with status %s", page, done.returncode)
        raise PageUnavailable()
    return done.stdout


def _render(header: dict, data: bytes) -> bytes:
    # Heavy renderers, loaded only in the child process that draws a page (never in the web's).
    import pypdfium2 as pdfium
    from PIL import Image, ImageDraw

    document = pdfium.PdfDocument(data)
    if not 1 <= header["page"] <= len(document):
        raise LookupError(header["page"])
    page = document[header["page"] - 1]
    width, height = page.get_size()
    scale = min(3.0, header["width"] / max(width, 1.0))
    image = page.render(scale=scale).to_pil().convert("RGBA")
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    text = page.get_textpage()
    for line in header["lines"]:
        found = text.search(line, match_case=False).get_next()
        if found is None:
            continue
        index, count = found
        for number in range(text.count_rects(index, count)):
            left, bottom, right, top = text.get_rect(number)
            box = [
                left * scale - 2,
                (height - top) * scale - 2,
                right * scale + 2,
                (height - bottom) * scale + 2,
            ]
            draw.rectangle(box, fill=MARK, outline=OUTLINE, width=2)
    out = io.BytesIO()
    Image.alpha_composite(image, overlay).convert("RGB").save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> int:
    raw = sys.stdin.buffer.read()
    line, _, data = raw.partition(b"\n")
    header = json.loads(line)
    limit = int(header["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        png = _render(header, data)
    except Exception:  # no such page, or PDFium could not read the file: nothing to show
        return 2
    sys.stdout.buffer.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
