from django.conf import settings
from django.db import models


class ApiKey(models.Model):
    """A bearer credential. Only the SHA-256 of the key is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, db_index=True)
    key_sha256 = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
