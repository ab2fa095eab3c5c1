"""Helpers for the outside channels' tests: a resolver that never asks DNS, and a record of
every connection attempted."""

import http.server
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class Resolver:
    """Answers every name with the same addresses and records what it was asked."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self.addresses = list(addresses)
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.addresses


@contextmanager
def no_connections() -> Iterator[list[object]]:
    """Every socket connection and system name lookup attempted inside, refused and recorded
    (the list yielded): a test asserts it stays empty."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("a connection was attempted")

    with (
        mock.patch.object(socket.socket, "connect", refuse),
        mock.patch.object(socket.socket, "connect_ex", refuse),
        mock.patch.object(socket, "create_connection", refuse),
        mock.patch.object(socket, "getaddrinfo", refuse),
    ):
        yield attempts


@contextmanager
def connections_recorded() -> Iterator[list[tuple[str, int]]]:
    """Every TCP connection opened inside (the address asked for), recorded and let through."""
    opened: list[tuple[str, int]] = []
    real = socket.create_connection

    def record(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        opened.append((address[0], address[1]))
        return real(address, *args, **kwargs)  # type: ignore[arg-type]

    with mock.patch.object(socket, "create_connection", record):
        yield opened


SECRET = "SECRET-provider-text-7f3a9c"
CHUNK = b"x" * 65536
HUGE_BYTES = 64 * 1024 * 1024
PAGE = (
    b"<!doctype html><html><head><title>Retention</title></head>"
    b"<body><p>Invoices are kept for seven years.</p></body></html>"
)


class LocalServer:
    """An HTTP (or, given a context, HTTPS) server on 127.0.0.1, on a thread of its own, whose
    paths each play one kind of remote server. It records each request's path and headers,
    the names TLS clients asked for, and how the huge and slow answers ended."""

    def __init__(self, pdf: bytes, tls: ssl.SSLContext | None = None) -> None:
        self.pdf = pdf
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.server_names: list[str | None] = []
        self.ended: dict[str, tuple[str, int]] = {}  # path: ("client gone" | "complete", bytes)
        self.stop = threading.Event()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        if tls is not None:
            tls.sni_callback = lambda sock, name, context: self.server_names.append(name)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def __enter__(self) -> "LocalServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_ended(self, path: str) -> tuple[str, int]:
        """How `path`'s answer ended, once it has (a generous guard, never a measurement)."""
        for _ in range(200):
            if path in self.ended:
                return self.ended[path]
            time.sleep(0.05)
        raise AssertionError(f"{path} did not end")


def _handler_for(server: LocalServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            server.requests.append((self.path, dict(self.headers.items())))
            path, _, query = self.path.partition("?")
            parts = path.strip("/").split("/")
            if path == "/page.html":
                self.answer(200, PAGE, "text/html; charset=utf-8")
            elif path == "/doc.pdf":
                self.answer(200, server.pdf, "application/pdf")
            elif parts[0] == "redirect":
                left = int(parts[1])  # redirects still to come, this one included
                location = f"/redirect/{left - 1}" if left > 1 else "/page.html"
                self.redirect(location)
            elif path == "/to":
                self.redirect(urllib.parse.unquote(query), cookie=True)
            elif path == "/no-location":
                self.send_response(302)
                self.end_headers()
            elif path == "/huge":
                self.stream(path, declared=None)
            elif path == "/huge-declared":
                self.stream(path, declared=10 * 1024**3)
            elif path == "/slow":
                self.slow_body(path)
            elif path == "/slow-headers":
                server.stop.wait(60)
                self.answer(200, PAGE, "text/html")
            elif parts[0] == "status":
                self.send_response(int(parts[1]), f"{SECRET} reason")
                self.send_header("Content-Type", "text/html")
                self.send_header("WWW-Authenticate", f'Basic realm="{SECRET}"')
                self.end_headers()
                self.wfile.write(f"<h1>{SECRET}</h1>".encode())
            else:
                self.answer(404, b"not here", "text/plain")

        def answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def redirect(self, location: str, *, cookie: bool = False) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            if cookie:
                self.send_header("Set-Cookie", f"session={SECRET}; Path=/")
            self.end_headers()

        def stream(self, path: str, *, declared: int | None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if declared is not None:
                self.send_header("Content-Length", str(declared))
            self.end_headers()
            written = 0
            try:
                while written < HUGE_BYTES and not server.stop.is_set():
                    self.wfile.write(CHUNK)
                    written += len(CHUNK)
            except OSError:
                server.ended[path] = ("client gone", written)
                return
            server.ended[path] = ("complete", written)

        def slow_body(self, path: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            written = 0
            try:
                while written < 100000 and not server.stop.wait(0.05):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    written += 1
            except OSError:
                server.ended[path] = ("client gone", written)
                return
            server.ended[path] = ("complete", written)

    return Handler


def certificates(tmp_path: Path, names: Sequence[str]) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A throwaway CA and a certificate it signs for `names`: the server's TLS context and a
    client context that trusts only that CA."""
    now = datetime.now(UTC)

    def signed(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: x509.Name,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(name) for name in names]),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "koinon test CA")])
    ca_cert = signed("koinon test CA", ca_key, ca_name, ca_key, ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = signed(names[0], leaf_key, ca_name, ca_key, ca=False)
    chain = tmp_path / "server.pem"
    chain.write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM)
        + leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(chain)
    client = ssl.create_default_context(
        cadata=ca_cert.public_bytes(serialization.Encoding.PEM).decode()
    )
    return server, client
