"""Outside channels (issue 50): what a superuser configures, and which spaces a curator has
enabled each for. An asker reaches a channel only through a space that enables it, and
enabling one grants access to nothing (SPEC §5)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from knowledge.models import Space
from outside.references import url_is_fetchable

# Every outside call is bounded: these are the ranges a configuration may choose within.
TIMEOUT_RANGE = (0.5, 60.0)  # seconds, the whole call
RESULTS_RANGE = (1, 50)
BYTES_RANGE = (1024, 50 * 1024 * 1024)


class ChannelKind(models.TextChoices):
    """The five outside tools of SPEC §5's evidence policy."""

    RETRIEVAL_ENDPOINT = "retrieval_endpoint", "Retrieval endpoint (OpenAI vector store search)"
    FEDERATED_RAG = "federated_rag", "Another koinon (federated search)"
    WEB_SEARCH = "web_search", "Web search (SearxNG JSON API)"
    FETCH_URL = "fetch_url", "Fetch URLs"
    MCP_SEARCH = "mcp_search", "MCP server's search tool"


class McpTransport(models.TextChoices):
    HTTP = "http", "Streamable HTTP"
    STDIO = "stdio", "Standard input and output (a local command)"


class Channel(models.Model):
    """One configured outside source. Its credential is stored encrypted
    (outside.credentials) and is never shown, logged or written into an audit or receipt."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=32, choices=ChannelKind.choices)
    # The service's base URL; for an MCP server over stdio, the command line to start it.
    # Configured by a superuser, so an address inside the network is allowed here: the SSRF
    # rules guard the URLs an asker or a search result names (fetch_url, web_search).
    endpoint = models.CharField(max_length=2000, blank=True)
    transport = models.CharField(
        max_length=8, choices=McpTransport.choices, default=McpTransport.HTTP
    )
    # What the kind needs beyond the endpoint: `store_id` (retrieval_endpoint), `tool`
    # (mcp_search; default "search"), `urls` (fetch_url: the pages a space lists as sources,
    # fetched for each question; the address rules apply to each, and to every redirect).
    options = models.JSONField(default=dict, blank=True)
    credential = models.BinaryField(null=True, blank=True, editable=False)
    timeout_seconds = models.FloatField(default=10.0)
    max_results = models.PositiveIntegerField(default=5)
    max_bytes = models.PositiveIntegerField(default=5 * 1024 * 1024)
    # A superuser's switch: an inactive channel is not configured for anyone.
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=ChannelKind.values), name="channel_kind_known"
            ),
            models.CheckConstraint(
                condition=models.Q(
                    timeout_seconds__gte=TIMEOUT_RANGE[0], timeout_seconds__lte=TIMEOUT_RANGE[1]
                )
                & models.Q(max_results__gte=RESULTS_RANGE[0], max_results__lte=RESULTS_RANGE[1])
                & models.Q(max_bytes__gte=BYTES_RANGE[0], max_bytes__lte=BYTES_RANGE[1]),
                name="channel_calls_are_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def __repr__(self) -> str:
        # Never the credential, not even its token.
        return f"<Channel {self.pk}: {self.name} ({self.kind})>"

    @property
    def has_credential(self) -> bool:
        return bool(self.credential)

    def clean(self) -> None:
        errors = {
            **self._endpoint_errors(),
            **self._options_errors(),
            **self._bounds_errors(),
        }
        if errors:
            raise ValidationError(errors)

    def _endpoint_errors(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        stdio = self.kind == ChannelKind.MCP_SEARCH and self.transport == McpTransport.STDIO
        if self.kind == ChannelKind.FETCH_URL:
            if self.endpoint:
                errors["endpoint"] = "Fetching URLs needs no endpoint: leave it empty."
        elif stdio:
            if not self.endpoint.strip():
                errors["endpoint"] = "Give the command that starts the MCP server."
        elif not url_is_fetchable(self.endpoint):
            errors["endpoint"] = "Give the service's http:// or https:// URL, without a password."
        if self.transport == McpTransport.STDIO and self.kind != ChannelKind.MCP_SEARCH:
            errors["transport"] = "Only an MCP server runs over standard input and output."
        return errors

    def _options_errors(self) -> dict[str, str]:
        if not isinstance(self.options, dict):
            return {"options": "Options are a JSON object."}
        if (
            self.kind == ChannelKind.RETRIEVAL_ENDPOINT
            and not str(self.options.get("store_id", "")).strip()
        ):
            return {"options": 'A retrieval endpoint needs {"store_id": "…"}: the vector store.'}
        if self.kind == ChannelKind.FETCH_URL:
            urls = self.options.get("urls", [])
            if not (
                isinstance(urls, list)
                and len(urls) <= RESULTS_RANGE[1]
                and all(url_is_fetchable(url) for url in urls)
            ):
                return {
                    "options": f'Pages to fetch are {{"urls": ["https://…"]}}: at most '
                    f"{RESULTS_RANGE[1]} http:// or https:// URLs, without passwords."
                }
        return {}

    def _bounds_errors(self) -> dict[str, str]:
        return {
            field: f"Between {low} and {high}."
            for field, (low, high), value in (
                ("timeout_seconds", TIMEOUT_RANGE, self.timeout_seconds),
                ("max_results", RESULTS_RANGE, self.max_results),
                ("max_bytes", BYTES_RANGE, self.max_bytes),
            )
            if value is None or not low <= value <= high
        }


class SpaceChannel(models.Model):
    """A curator enabled `channel` for `space`: askers who read the space may use it."""

    space = models.ForeignKey(Space, on_delete=models.CASCADE, related_name="outside_channels")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="space_links")
    enabled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    enabled_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["space__name", "channel__name"]
        constraints = [
            models.UniqueConstraint(fields=["space", "channel"], name="space_channel_once")
        ]

    def __str__(self) -> str:
        return f"{self.channel.name} in {self.space.name}"


class Snapshot(models.Model):
    """What an outside channel returned, kept as evidence can be checked: the stored bytes
    are a revision of a private document of the asker (`origin` outside), extracted by the
    same extractors with the same damage checks (a second extraction where the format has
    one), so a quote from it is verified twice against stored text like any other. This row
    says where the bytes came from and when. Append-only (PostgreSQL refuses UPDATE, DELETE
    and TRUNCATE); the text is erased by the document's erasure path, and this row, which
    holds no text of the source, stays as the record that something was fetched."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    document = models.ForeignKey(
        "knowledge.Document", on_delete=models.PROTECT, related_name="outside_snapshots"
    )
    revision = models.ForeignKey(
        "knowledge.DocumentRevision", on_delete=models.PROTECT, related_name="outside_snapshots"
    )
    channel = models.ForeignKey(Channel, on_delete=models.PROTECT, related_name="snapshots")
    # As configured when fetched: a later rename or change of kind does not rewrite history.
    channel_kind = models.CharField(max_length=32, choices=ChannelKind.choices)
    channel_name = models.CharField(max_length=100)
    # The remote identity: the URL after redirects, the remote document, revision and
    # passage, the hash of the text as the remote reported it, the MCP tool.
    url = models.CharField(max_length=2000, blank=True)
    remote_document_id = models.CharField(max_length=200, blank=True)
    remote_revision_id = models.CharField(max_length=200, blank=True)
    remote_passage_id = models.CharField(max_length=200, blank=True)
    remote_text_sha256 = models.CharField(max_length=64, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    content_type = models.CharField(max_length=200, blank=True)
    sha256 = models.CharField(max_length=64)  # of the stored bytes (the revision's)
    size = models.PositiveBigIntegerField()
    fetched_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["owner", "-fetched_at"], name="snapshot_owner_fetched")]

    def __str__(self) -> str:
        return f"{self.channel_name}: {self.url or self.remote_document_id or self.sha256[:12]}"
