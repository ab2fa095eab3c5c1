from django.conf import settings
from django.db import models


class ToolCall(models.Model):
    """One MCP tool call: who called which tool with what, and how many results came back.

    Written for every call, refused ones included; `arguments` holds the caller's arguments
    with long strings cut (see `mcp_server.services.arguments_for_audit`).
    """

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP"
        STDIO = "stdio", "stdio"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The visible prefix of the API key (HTTP); empty for stdio, which runs as a named user.
    key_prefix = models.CharField(max_length=16, blank=True)
    transport = models.CharField(max_length=8, choices=Transport.choices)
    tool = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict)
    result_count = models.PositiveIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="mcp_toolcall_user_recent")]

    def __str__(self) -> str:
        return f"{self.tool} by {self.user_id} at {self.created_at:%Y-%m-%d %H:%M:%S}"
