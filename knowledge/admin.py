import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from guardian.admin import GuardedModelAdmin

from core.errors import ApiError
from core.types import request_user
from knowledge.curation import proposal_approve, proposal_reject
from knowledge.documents.extraction import revision_retry_extraction
from knowledge.erasure import ERASE_REASON_MAX, revision_erase
from knowledge.lifecycle import document_restore, document_withdraw
from knowledge.models import (
    Document,
    DocumentRevision,
    Erasure,
    Extraction,
    KnowledgeEntry,
    KnowledgeProposal,
    KnowledgeVersion,
    Space,
)
from knowledge.selectors import (
    documents_curated_by,
    erasures_curated_by,
    extractions_curated_by,
    revisions_curated_by,
    space_can_curate,
    spaces_curated_by,
)
from knowledge.services import space_create


class ReadOnlyAdmin(admin.ModelAdmin):
    """Revisions, extractions and passages are written by the pipeline only."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class SuperuserOnlyAdmin(ReadOnlyAdmin):
    """Rows that span every user and space (answers, receipts, queries): superusers only."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)


if TYPE_CHECKING:  # the admin classes this mixes into, for its call of `change_view`
    _ModelAdmin = admin.ModelAdmin
else:
    _ModelAdmin = object


class NoSaveButtons(_ModelAdmin):
    """Change pages whose fields are all read-only (actions need change permission) show
    no Save buttons: there is nothing to save."""

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        extra_context = {
            **(extra_context or {}),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
            "show_delete": False,
        }
        return super().change_view(request, object_id, form_url, extra_context)


class CuratedAdmin(admin.ModelAdmin):
    """Rows of the spaces the staff user curates, read through a `*_curated_by` selector.

    Staff status only opens admin; which rows a curator sees comes from their roles, so a
    staff user who curates nothing sees nothing here. Superusers see every space.
    """

    def curated(self, request: HttpRequest) -> QuerySet:
        raise NotImplementedError

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(pk__in=self.curated(request).values("pk"))

    def has_module_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return user.is_active and user.is_staff and spaces_curated_by(user=user).exists()

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if obj is None:
            return self.has_module_permission(request)
        return (
            self.has_module_permission(request) and self.curated(request).filter(pk=obj.pk).exists()
        )

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Space)
class SpaceAdmin(GuardedModelAdmin):
    """Roles are managed here by superusers (object permissions) or over the REST API."""

    list_display = ["name", "created_by", "created_at"]
    list_select_related = ["created_by"]
    search_fields = ["name"]
    # The operating point is set by the space's curators from a question set's curve
    # (answers.question_sets.services.space_operating_point_set checks the policy's floor).
    readonly_fields = [
        "created_by",
        "created_at",
        "operating_point",
        "operating_point_set_by",
        "operating_point_set_at",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Space]:
        return (
            super()
            .get_queryset(request)
            .filter(pk__in=spaces_curated_by(user=request.user).values("pk"))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Staff create spaces in the chat (/spaces/new/); admin's add is for superusers.
        return request.user.is_active and request.user.is_superuser

    def save_model(self, request: HttpRequest, obj: Space, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # A new space goes through the service, so its creator becomes its first curator.
        space = space_create(
            name=obj.name, description=obj.description, created_by=request_user(request)
        )
        obj.pk = space.pk
        obj.refresh_from_db()


class ExtractionInline(admin.TabularInline):
    model = Extraction
    fields = readonly_fields = (
        "role",
        "status",
        "serves_passages",
        "damage_summary",
        "error_code",
        "error_message",
        "progress",
        "extractor",
        "extractor_version",
    )
    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Shown inside a revision the user may already see (the parent admin is scoped).
        return request.user.is_active and request.user.is_staff

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(NoSaveButtons, CuratedAdmin):
    """Documents are added and revised in the library (the chat's space pages, which any
    curator reaches without staff status); here they are read, withdrawn and restored.
    Every change goes through knowledge.lifecycle, which checks the curator's role."""

    list_display = [
        "title",
        "kind",
        "space",
        "current_revision",
        "withdrawn_at",
        "created_at",
        "library",
    ]
    list_filter = [
        "kind",
        ("space", admin.RelatedOnlyFieldListFilter),
        ("withdrawn_at", admin.EmptyFieldListFilter),
    ]
    list_select_related = ["space", "current_revision"]
    search_fields = ["title"]
    fields = readonly_fields = (
        "title",
        "space",
        "kind",
        "created_by",
        "created_at",
        "current_revision",
        "withdrawn_at",
        "withdrawn_by",
        "withdrawn_reason",
        "library",
    )
    actions = ["withdraw_selected", "restore_selected"]

    def curated(self, request: HttpRequest) -> QuerySet[Document]:
        return documents_curated_by(user=request.user)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Actions need change permission; the fields stay read-only.
        return self.has_view_permission(request, obj)

    @admin.display(description="Add or revise")
    def library(self, document: Document) -> str:
        if document.space_id is None:
            return "—"
        url = reverse("chat:space", args=[document.space_id]) + f"#document-{document.pk}"
        return format_html('<a href="{}">In the library</a>', url)

    def _change(
        self, request: HttpRequest, queryset: QuerySet, change: Callable[..., object], done: str
    ) -> None:
        for document in queryset:
            try:
                change(user=request.user, document=document)
                self.message_user(request, f"“{document.title}”: {done}.")
            except ApiError as error:
                self.message_user(request, f"“{document.title}”: {error.detail}", messages.ERROR)

    @admin.action(description="Withdraw selected documents (no longer searched or quoted)")
    def withdraw_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._change(request, queryset, document_withdraw, "withdrawn")

    @admin.action(description="Restore selected documents")
    def restore_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._change(request, queryset, document_restore, "restored")


@admin.register(DocumentRevision)
class DocumentRevisionAdmin(NoSaveButtons, CuratedAdmin):
    list_display = [
        "document",
        "number",
        "filename",
        "size",
        "uploaded_by",
        "created_at",
        "extraction_progress",
        "text_warning",
    ]
    list_select_related = ["document", "uploaded_by"]
    search_fields = ["document__title", "sha256"]
    inlines = [ExtractionInline]
    actions = ["retry_failed_extractions"]

    def curated(self, request: HttpRequest) -> QuerySet[DocumentRevision]:
        return revisions_curated_by(user=request.user)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DocumentRevision]:
        return super().get_queryset(request).prefetch_related("extractions")

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Actions need change permission; the fields stay read-only (no change form fields).
        return self.has_view_permission(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        names = [field.name for field in DocumentRevision._meta.fields]
        return [name if name != "file" else "download" for name in names] + [
            "text_warning",
            "erasure_state",
        ]

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> tuple[str, ...]:
        return tuple(self.get_readonly_fields(request, obj))

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.download_view)
        erase = self.admin_site.admin_view(self.erase_view)
        return [
            path("<path:object_id>/file/", view, name="knowledge_documentrevision_file"),
            path("<path:object_id>/erase/", erase, name="knowledge_documentrevision_erase"),
            *super().get_urls(),
        ]

    @admin.display(description="Erasure")
    def erasure_state(self, revision: DocumentRevision) -> str:
        erased = Erasure.objects.filter(revision=revision).first()
        if erased is not None:
            return (
                f"Text erased on {erased.erased_at:%Y-%m-%d} by {erased.erased_by}: {erased.reason}"
            )
        url = reverse("admin:knowledge_documentrevision_erase", args=[revision.pk])
        return format_html('<a href="{}">Erase this revision\'s text…</a>', url)

    def erase_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Erase the revision's text for good (knowledge.erasure, which checks the role):
        GET asks for the reason, POST erases. Outside the curator's scope: 404."""
        revision = self.get_object(request, unquote(object_id))
        if revision is None or not self.has_view_permission(request, revision):
            raise Http404
        error = ""
        if request.method == "POST":
            try:
                reason = request.POST.get("reason", "")
                revision_erase(
                    user=request_user(request),
                    document=revision.document,
                    revision=revision,
                    reason=reason,
                )
            except ApiError as failure:
                if failure.status_code == 403:
                    raise PermissionDenied from None
                error = str(failure.detail)
            else:
                self.message_user(request, f"{revision}: its text was erased.")
                change = reverse("admin:knowledge_documentrevision_change", args=[revision.pk])
                return HttpResponseRedirect(change)
        context = {
            **self.admin_site.each_context(request),
            "revision": revision,
            "error": error,
            "reason_max": ERASE_REASON_MAX,
            "opts": self.model._meta,
            "title": f"Erase the text of {revision}",
        }
        return TemplateResponse(request, "admin/knowledge/documentrevision/erase.html", context)

    @admin.display(description="File")
    def download(self, revision: DocumentRevision) -> str:
        if not revision.file:
            return "—"
        url = reverse("admin:knowledge_documentrevision_file", args=[revision.pk])
        return format_html('<a href="{}">{}</a> ({} bytes)', url, revision.filename, revision.size)

    def download_view(self, request: HttpRequest, object_id: str) -> FileResponse:
        """The revision's stored bytes, for the curators who may see it (the changelist's
        scope); anyone else, and a file no longer stored, is a 404."""
        revision = self.get_object(request, unquote(object_id))
        if revision is None or not self.has_view_permission(request, revision):
            raise Http404
        try:
            handle = revision.file.open("rb")
        except (OSError, ValueError):
            raise Http404 from None
        return FileResponse(handle, as_attachment=True, filename=revision.filename)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        revision = self.get_object(request, unquote(object_id))
        if request.method == "GET" and revision is not None and revision.text_warning:
            self.message_user(request, revision.text_warning, messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="Extraction")
    def extraction_progress(self, revision: DocumentRevision) -> str:
        return ", ".join(
            f"{e.role}: {e.status} {e.progress}%"
            + (f" ({e.error_code})" if e.error_code else "")
            + (f", {e.damage_summary}" if e.damage is not None else "")
            + (", serves passages" if e.serves_passages else "")
            for e in revision.extractions.all()
        )

    @admin.display(description="Text warning")
    def text_warning(self, revision: DocumentRevision) -> str:
        return revision.text_warning or "—"

    @admin.action(description="Retry failed extractions")
    def retry_failed_extractions(self, request: HttpRequest, queryset: QuerySet) -> None:
        for revision in queryset:
            try:
                revision_retry_extraction(revision=revision)
                self.message_user(request, f"{revision}: extraction queued again.")
            except ApiError as error:
                self.message_user(request, f"{revision}: {error.detail}", messages.WARNING)


@admin.register(Erasure)
class ErasureAdmin(NoSaveButtons, CuratedAdmin):
    """The erasure log of the spaces the user curates: read only, here and in PostgreSQL."""

    list_display = ["erased_at", "document", "revision", "erased_by", "reason"]
    list_select_related = ["document", "revision", "erased_by"]
    fields = readonly_fields = (
        "erased_at",
        "document",
        "revision",
        "erased_by",
        "reason",
        "counts",
    )

    def curated(self, request: HttpRequest) -> QuerySet[Erasure]:
        return erasures_curated_by(user=request.user)


@admin.register(Extraction)
class ExtractionAdmin(NoSaveButtons, CuratedAdmin):
    # Narrow enough for 1280 px: the error in words (not also its code), no version columns.
    list_display = [
        "revision",
        "role",
        "status",
        "progress",
        "error_message",
        "damage_summary",
        "extractor",
        "attempts",
        "heartbeat_at",
    ]
    list_filter = ["status", "role", "serves_passages", "error_code"]
    list_select_related = ["revision__document"]
    exclude = ["norm_text"]
    readonly_fields = ["error_message", "damage_summary"]

    def curated(self, request: HttpRequest) -> QuerySet[Extraction]:
        return extractions_curated_by(user=request.user)


def _proposal_diff(proposal: KnowledgeProposal) -> str:
    current = proposal.entry.current_version if proposal.entry else None
    before = current.body.splitlines() if current else []
    label = f"v{current.number}" if current else "(new entry)"
    lines = difflib.unified_diff(before, proposal.body.splitlines(), label, "proposal", lineterm="")
    # Classes, not style attributes: the Content-Security-Policy allows no inline style.
    classes = {"+": "diff-added", "-": "diff-removed", "@": "diff-hunk"}
    rendered = format_html_join(
        "\n", '<span class="{}">{}</span>', ((classes.get(line[:1], ""), line) for line in lines)
    )
    return format_html('<pre class="proposal-diff">{}</pre>', rendered)


@admin.register(KnowledgeProposal)
class KnowledgeProposalAdmin(NoSaveButtons, admin.ModelAdmin):
    """Curators review here; every decision goes through knowledge.curation."""

    change_form_template = "admin/knowledge/knowledgeproposal/change_form.html"

    class Media:
        css = {"all": ["knowledge/admin.css"]}

    list_display = ["title", "space", "status", "origin", "proposed_by", "created_at"]
    list_filter = ["status", "origin", ("space", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["space", "proposed_by"]
    search_fields = ["title", "body"]
    actions = ["approve_selected", "reject_selected"]
    fields = readonly_fields = (
        "title",
        "space",
        "entry",
        "base_version",
        "status",
        "origin",
        "proposed_by",
        "created_at",
        "reason",
        "output_capture",
        "diff",
        "reviewer",
        "reviewed_at",
        "review_note",
    )

    @admin.display(description="Output capture (conversation-derived)")
    def output_capture(self, proposal: KnowledgeProposal) -> str:
        """The exact sealed answer the proposal came from: approval is refused once that
        answer was regenerated."""
        capture = proposal.capture
        if not capture:
            return "—"
        return (
            f"run {capture['run_id']}, generation {capture['generation']}, release "
            f"{capture['release_id']}, text SHA-256 {capture['text_sha256']}"
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[KnowledgeProposal]:
        curated = spaces_curated_by(user=request.user)
        return super().get_queryset(request).filter(space__in=curated.values("pk"))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(
        self, request: HttpRequest, obj: KnowledgeProposal | None = None
    ) -> bool:
        if obj is None:
            return self.has_module_permission(request)
        return space_can_curate(user=request.user, space=obj.space)

    def has_change_permission(
        self, request: HttpRequest, obj: KnowledgeProposal | None = None
    ) -> bool:
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: KnowledgeProposal | None = None
    ) -> bool:
        return False

    @admin.display(description="Diff against the current version")
    def diff(self, proposal: KnowledgeProposal) -> str:
        return _proposal_diff(proposal)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        decision = next((key for key in ("_approve", "_reject") if key in request.POST), None)
        if request.method == "POST" and decision:
            proposal = self.get_object(request, unquote(object_id))
            if proposal is None or not self.has_change_permission(request, proposal):
                raise PermissionDenied
            self._decide(request, proposal, decision, request.POST.get("review_note", ""))
            return HttpResponseRedirect(reverse("admin:knowledge_knowledgeproposal_changelist"))
        return super().change_view(request, object_id, form_url, extra_context)

    def _decide(
        self, request: HttpRequest, proposal: KnowledgeProposal, decision: str, note: str
    ) -> None:
        try:
            if decision == "_approve":
                version = proposal_approve(
                    proposal_id=proposal.pk, curator=request_user(request), note=note
                )
                self.message_user(
                    request, f"Approved “{proposal.title}” as version {version.number}."
                )
            else:
                proposal_reject(proposal_id=proposal.pk, curator=request_user(request), note=note)
                self.message_user(request, f"Rejected “{proposal.title}”.")
        except ApiError as error:
            self.message_user(request, f"“{proposal.title}”: {error.detail}", messages.ERROR)

    @admin.action(description="Approve selected proposals")
    def approve_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        for proposal in queryset:
            self._decide(request, proposal, "_approve", "")

    @admin.action(description="Reject selected proposals")
    def reject_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        for proposal in queryset:
            self._decide(request, proposal, "_reject", "")


@admin.register(KnowledgeEntry)
class KnowledgeEntryAdmin(CuratedAdmin):
    list_display = ["title", "space", "current_version", "created_at"]
    list_select_related = ["space", "current_version"]

    def curated(self, request: HttpRequest) -> QuerySet[KnowledgeEntry]:
        curated = spaces_curated_by(user=request.user)
        return KnowledgeEntry.objects.filter(space__in=curated.values("pk"))


@admin.register(KnowledgeVersion)
class KnowledgeVersionAdmin(CuratedAdmin):
    list_display = ["entry", "number", "approved_by", "approved_at"]
    list_select_related = ["entry", "approved_by"]

    def curated(self, request: HttpRequest) -> QuerySet[KnowledgeVersion]:
        curated = spaces_curated_by(user=request.user)
        return KnowledgeVersion.objects.filter(entry__space__in=curated.values("pk"))
