from django.contrib import admin

from audit.models import AnswerAudit, OutputRelease, StreamEvent
from knowledge.admin import SuperuserOnlyAdmin


@admin.register(OutputRelease)
class OutputReleaseAdmin(SuperuserOnlyAdmin):
    list_display = ["publication_sequence", "kind", "run", "generation", "reset_context",
                    "created_at"]  # fmt: skip
    list_filter = ["kind"]
    list_select_related = ["run", "generation"]


@admin.register(AnswerAudit)
class AnswerAuditAdmin(SuperuserOnlyAdmin):
    list_display = ["run", "updated_at"]


@admin.register(StreamEvent)
class StreamEventAdmin(SuperuserOnlyAdmin):
    list_display = ["run", "generation", "sequence", "event", "created_at"]
