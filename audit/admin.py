from django.contrib import admin

from audit.models import AnswerAudit, OutputRelease, StreamEvent
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
    """The plan, steps and memories of every run: shown without their text (searches can
    carry words from a private file or a memory entry)."""

    list_display = ["run", "updated_at"]
    fields = readonly_fields = (
        "run",
        "updated_at",
        "plan_redacted",
        "generations_redacted",
        "memories_redacted",
    )

    @admin.display(description="plan (redacted)")
    def plan_redacted(self, obj: AnswerAudit) -> str:
        return redacted_html(obj.plan)

    @admin.display(description="generations (redacted)")
    def generations_redacted(self, obj: AnswerAudit) -> str:
        return redacted_html(obj.generations)

    @admin.display(description="memories used (redacted)")
    def memories_redacted(self, obj: AnswerAudit) -> str:
        return redacted_html(obj.memories_used)


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
