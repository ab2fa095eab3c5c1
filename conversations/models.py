"""Conversations shared with named users, and publication intents: the exact output
capture of an answer proposed as curated knowledge (SPEC §3, §8)."""

from django.conf import settings
from django.db import models


class ConversationShare(models.Model):
    """Read-only access for one named user. A recipient sees a sealed answer only if they
    may see every source it cites (the sealed-read boundary decides, at read time)."""

    conversation = models.ForeignKey(
        "answers.Conversation", on_delete=models.PROTECT, related_name="shares"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "recipient"], name="conversation_share_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} shared with {self.recipient_id}"


class PublicationIntent(models.Model):
    """A preview of "propose this answer as curated knowledge": the sealed text and the
    release it was sealed with. The proposal made from it keeps the capture; approval is
    refused once the run has a newer generation."""

    conversation = models.ForeignKey(
        "answers.Conversation", on_delete=models.PROTECT, related_name="+"
    )
    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="+")
    generation = models.PositiveIntegerField()
    release = models.ForeignKey("audit.OutputRelease", on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    text_sha256 = models.CharField(max_length=64)
    space = models.ForeignKey("knowledge.Space", on_delete=models.PROTECT, related_name="+")
    title = models.CharField(max_length=300)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    proposal = models.OneToOneField(
        "knowledge.KnowledgeProposal",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="intent",
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"intent {self.pk} on {self.run_id} g{self.generation}"

    @property
    def capture(self) -> dict:
        return {
            "run_id": str(self.run_id),
            "generation": self.generation,
            "release_id": str(self.release_id),
            "text_sha256": self.text_sha256,
        }
