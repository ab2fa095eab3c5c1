from django.contrib import admin

from audit.models import AnswerAudit, AuditStep, OutputRelease, StreamEvent
from core.redaction import redacted_html
from knowledge.admin import SuperuserOnlyAdmin


@admin.register(OutputRelease)
class OutputReleaseAdmin(SuperuserOnlyAdmin):
    list_display = [
        "publication_sequence",
        "kind",
        "run",
        "generation",
        "reset_context",
        "created_at",
    ]
    list_filter = ["kind"]
    list_select_related = ["run", "generation"]
    exclude = ["searched"]
    readonly_fields = ["searched_redacted"]

    @admin.display(description="searched (redacted)")
    def searched_redacted(self, obj: OutputRelease) -> str:
        return redacted_html(obj.searched)


@admin.register(AnswerAudit)
class AnswerAuditAdmin(SuperuserOnlyAdmin):
    """The plan, steps and memories of every run's generations: shown without their text
    (searches can carry words from a private file or a memory entry)."""

    list_display = ["run", "number", "created_at"]
    fields = readonly_fields = (
        "run",
        "number",
        "created_at",
        "plan_redacted",
        "generation_redacted",
    )

    @admin.display(description="plan (redacted)")
    def plan_redacted(self, obj: AnswerAudit) -> str:
        return redacted_html(obj.plan)

    @admin.display(description="generation (redacted)")
    def generation_redacted(self, obj: AnswerAudit) -> str:
        return redacted_html(obj.generation)


@admin.register(AuditStep)
class AuditStepAdmin(SuperuserOnlyAdmin):
    """Steps timed after a generation's sealing (the publication), without their text."""

    list_display = ["run", "generation", "created_at"]
    fields = readonly_fields = ("run", "generation", "created_at", "step_redacted")

    @admin.display(description="step (redacted)")
    def step_redacted(self, obj: AuditStep) -> str:
        return redacted_html(obj.step)


@admin.register(StreamEvent)
class StreamEventAdmin(SuperuserOnlyAdmin):
    """What a run streamed, without its text: a `completed` event carries the sealed
    answer, which may quote a private file."""

    list_display = ["run", "generation", "sequence", "event", "created_at"]
    fields = readonly_fields = (
        "run",
        "generation",
        "sequence",
        "event",
        "created_at",
        "data_redacted",
    )

    @admin.display(description="data (redacted)")
    def data_redacted(self, obj: StreamEvent) -> str:
        return redacted_html(obj.data)
