"""The world model: per user, the claims a released comparison established, each source's
stance on them with its verbatim quote, and the run that established them. Written only
in the publication transaction of that comparison (`worldmodel.services`)."""

from django.conf import settings
from django.db import models


class Stance(models.TextChoices):
    AGREES = "agrees"
    DISAGREES = "disagrees"
    PARTLY = "partly"


class WorldClaim(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="world_claims"
    )
    run = models.ForeignKey("answers.AnswerRun", on_delete=models.PROTECT, related_name="+")
    generation = models.PositiveIntegerField()
    question = models.TextField()
    text = models.CharField(max_length=300)  # the model's claim: analysis, never a fact
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-id"], name="worldclaim_user_recent")]

    def __str__(self) -> str:
        return f"claim {self.pk}"  # never its text: admin titles and breadcrumbs show this


class WorldStance(models.Model):
    claim = models.ForeignKey(WorldClaim, on_delete=models.CASCADE, related_name="stances")
    document = models.ForeignKey("knowledge.Document", on_delete=models.PROTECT, related_name="+")
    revision = models.ForeignKey(
        "knowledge.DocumentRevision", on_delete=models.PROTECT, related_name="+"
    )
    fact_id = models.CharField(max_length=64)
    stance = models.CharField(max_length=16, choices=Stance.choices)
    quote = models.TextField()  # verbatim, verified twice and judged before release

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(stance__in=["agrees", "disagrees", "partly"]),
                name="worldstance_stance_known",
            )
        ]

    def __str__(self) -> str:
        return f"{self.stance} ({self.fact_id})"
