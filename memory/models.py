"""What koinon remembers for a user or a project (SPEC §8): explicit corrections and
facts of verified, sealed answers — never prose that was not sealed. Memory steers the
planner's searches; it never answers by itself."""

from django.conf import settings
from django.db import models


class MemoryEntry(models.Model):
    class Scope(models.TextChoices):
        PERSONAL = "personal"
        PROJECT = "project"

    class Kind(models.TextChoices):
        CORRECTION = "correction"  # said by the user: "the retention period is in …"
        FACT = "fact"  # the quotes of a sealed answer, with its sources

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    scope = models.CharField(max_length=16, choices=Scope.choices)
    # The space an entry is for: a project entry's (its project memory must be on); a
    # personal entry's when made for one space (none: for every space).
    space = models.ForeignKey(
        "knowledge.Space", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    text = models.TextField()
    # Where it came from: {"type": "correction"} or {"type": "release", "run_id",
    # "generation", "release_id", "text_sha256"}.
    origin = models.JSONField()
    sources = models.JSONField(default=list)  # the sealed answer's source references
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        verbose_name_plural = "memory entries"
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scope="personal")
                | models.Q(scope="project", space__isnull=False),
                name="memory_project_space",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.text[:40]}"


class ProjectMemory(models.Model):
    """A space's project memory, switched on by one of its curators (opt-in)."""

    space = models.OneToOneField("knowledge.Space", on_delete=models.PROTECT, related_name="+")
    enabled = models.BooleanField(default=False)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"project memory of {self.space_id}: {'on' if self.enabled else 'off'}"
