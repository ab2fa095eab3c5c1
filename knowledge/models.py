from django.conf import settings
from django.db import models


class Space(models.Model):
    """The permission boundary: readers hold view_space, curators also curate_space."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", null=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [("curate_space", "Can curate the space (review proposals, manage members)")]

    def __str__(self) -> str:
        return self.name
