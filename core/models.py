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


class LoginFailure(models.Model):
    """One wrong password on the sign-in pages (chat and admin), or an attempt whose
    password is being checked (stored first, removed if right): what throttles the next
    attempts for that user name and that address (`core.throttle`)."""

    username = models.CharField(max_length=150)  # as typed, case-folded; may name no user
    address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["username", "created_at"], name="loginfailure_username"),
            models.Index(fields=["address", "created_at"], name="loginfailure_address"),
        ]

    def __str__(self) -> str:
        return f"login failure {self.pk}"
