from django.conf import settings
from django.db.models import Count, Prefetch
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import GoneError, NotFoundError, PayloadTooLargeError
from core.inputs import MAX_ID, ObjectIdField, StrictSerializer, TextField
from core.pagination import Pagination
from core.schema import CONFLICT, PAGE_PARAMETERS, TEXT_NOT_BLANK, paginated
from core.types import request_user
from knowledge.documents.upload import document_upload
from knowledge.erasure import ERASE_REASON_MAX, revision_erase
from knowledge.lifecycle import WITHDRAW_REASON_MAX, document_restore, document_withdraw
from knowledge.models import Document, DocumentRevision, Erasure, Extraction
from knowledge.retrieval import RETRIEVAL_TOOLS, retrieve
from knowledge.scope import access_scope_build
from knowledge.selectors import (
    document_admitted_text,
    document_get_for_user,
    documents_listed_for,
    revision_of_document,
    space_get_for_user,
)


class ExtractionOutput(serializers.ModelSerializer):
    error_message = serializers.CharField(
        read_only=True, allow_blank=True, help_text="What `error_code` means; empty if none."
    )
    damage = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="Share (0-1) of the text's words, by letters, that look glued; null until "
        "admitted.",
    )
    damaged = serializers.BooleanField(
        source="is_damaged",
        read_only=True,
        help_text="`damage` is past KOINON_EXTRACTION_DAMAGE_THRESHOLD.",
    )
    serves_passages = serializers.BooleanField(
        read_only=True, help_text="Passages and quotes are cut from this extraction's text."
    )

    class Meta:
        model = Extraction
        fields = [
            "role",
            "status",
            "error_code",
            "error_message",
            "progress",
            "extractor",
            "extractor_version",
            "damage",
            "damaged",
            "serves_passages",
        ]


class RevisionOutput(serializers.ModelSerializer):
    extractions = ExtractionOutput(many=True)
    erased_at = serializers.DateTimeField(
        source="erasure.erased_at",
        allow_null=True,
        default=None,
        help_text="When this revision's text was erased for good; null if it was not.",
    )
    passage_count = serializers.IntegerField(source="passage_total", default=0)
    text_warning = serializers.CharField(
        read_only=True,
        allow_blank=True,
        help_text="Empty, or why the text passages come from needs a curator's eye (a damaged "
        "extraction, or passages taken from the secondary).",
    )

    class Meta:
        model = DocumentRevision
        fields = [
            "id",
            "number",
            "sha256",
            "filename",
            "size",
            "created_at",
            "extractions",
            "passage_count",
            "text_warning",
            "erased_at",
        ]


class ErasureOutput(serializers.ModelSerializer):
    revision_number = serializers.IntegerField(source="revision.number")
    erased_by = serializers.CharField(source="erased_by.get_username")
    counts = serializers.DictField(
        help_text="Per table, how many stored rows had a copy replaced by the tombstone."
    )

    class Meta:
        model = Erasure
        fields = [
            "id",
            "document",
            "revision",
            "revision_number",
            "erased_at",
            "erased_by",
            "reason",
            "counts",
        ]


class DocumentOutput(serializers.ModelSerializer):
    private = serializers.BooleanField(source="is_private")
    withdrawn = serializers.BooleanField(
        source="is_withdrawn",
        help_text="Taken out of the current library: not searched, not quotable; its history "
        "and receipts stay.",
    )
    withdrawn_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        model = Document
        fields = [
            "id",
            "title",
            "kind",
            "space",
            "private",
            "created_at",
            "current_revision",
            "withdrawn",
            "withdrawn_at",
        ]


class DocumentDetailOutput(DocumentOutput):
    revisions = RevisionOutput(many=True)

    class Meta(DocumentOutput.Meta):
        fields = [*DocumentOutput.Meta.fields, "revisions"]


class DocumentUploadOutput(DocumentDetailOutput):
    revision = serializers.IntegerField(help_text="The revision the upload created or matched.")
    created = serializers.BooleanField(help_text="False when the bytes were already uploaded.")

    class Meta(DocumentDetailOutput.Meta):
        fields = [*DocumentDetailOutput.Meta.fields, "revision", "created"]


class DocumentTextOutput(serializers.Serializer):
    document = serializers.IntegerField()
    revision = serializers.IntegerField()
    role = serializers.CharField(help_text="The extraction passages are cut from.")
    extractor = serializers.CharField()
    text_sha256 = serializers.CharField()
    text = serializers.CharField()


class CandidateOutput(serializers.Serializer):
    passage_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    revision_id = serializers.IntegerField()
    extraction_id = serializers.IntegerField()
    char_start = serializers.IntegerField()
    char_end = serializers.IntegerField()
    text = serializers.CharField()
    locator = serializers.DictField()
    score = serializers.FloatField()
    contributions = serializers.DictField()


class OutcomeOutput(serializers.Serializer):
    tool = serializers.CharField()
    state = serializers.CharField()
    code = serializers.CharField()
    result_count = serializers.IntegerField()
    retryable = serializers.BooleanField()


class SearchOutput(serializers.Serializer):
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.ChoiceField(choices=["unverified"])  # type: ignore[assignment]
    results = CandidateOutput(many=True)
    outcomes = OutcomeOutput(many=True)


class DocumentListCreateApi(APIView):
    @extend_schema_serializer(component_name="DocumentUploadInput")
    class InputSerializer(StrictSerializer):
        file = serializers.FileField(allow_empty_file=True)
        space = serializers.CharField(required=False)
        title = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
        private = serializers.BooleanField(required=False, default=False)
        document = serializers.CharField(required=False)

        def validate(self, attrs: dict) -> dict:
            attrs = super().validate(attrs)
            if attrs["private"] == ("space" in attrs):
                raise serializers.ValidationError(
                    {"space": "Give a space, or private=true for a private file (not both)."}
                )
            return attrs

    @extend_schema(
        operation_id="documents_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(DocumentOutput, "DocumentPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        documents = documents_listed_for(user=request.user)
        page = paginator.paginate_queryset(documents, request, self)
        return paginator.get_paginated_response(DocumentOutput(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={202: DocumentUploadOutput, 200: DocumentUploadOutput, **CONFLICT},
    )
    def post(self, request: Request) -> Response:
        upload = request.FILES.get("file")
        if upload is not None and (upload.size or 0) > settings.KOINON_UPLOAD_MAX_BYTES:
            raise PayloadTooLargeError(
                f"The file is larger than {settings.KOINON_UPLOAD_MAX_BYTES} bytes."
            )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        space = document = None
        if "space" in values:
            space = space_get_for_user(user=request.user, space_id=values["space"])
        if "document" in values:
            document = document_get_for_user(user=request.user, document_id=values["document"])
        result = document_upload(
            user=request_user(request),
            filename=values["file"].name,
            data=values["file"].read(),
            space=space,
            private=values["private"],
            title=values["title"],
            document=document,
        )
        body = DocumentDetailOutput(_with_revisions(result.document)).data
        body["revision"] = result.revision.pk
        body["created"] = result.created
        return Response(body, status=status.HTTP_202_ACCEPTED if result.created else 200)


def _with_revisions(document: Document) -> Document:
    revisions = (
        DocumentRevision.objects.annotate(passage_total=Count("passages"))
        .select_related("erasure")
        .order_by("-number")
        .prefetch_related(Prefetch("extractions", queryset=Extraction.objects.order_by("role")))
    )
    return Document.objects.prefetch_related(Prefetch("revisions", queryset=revisions)).get(
        pk=document.pk
    )


class DocumentDetailApi(APIView):
    @extend_schema(responses=DocumentDetailOutput)
    def get(self, request: Request, document_id: str) -> Response:
        document = document_get_for_user(user=request.user, document_id=document_id)
        return Response(DocumentDetailOutput(_with_revisions(document)).data)


class DocumentWithdrawApi(APIView):
    """Take a document out of the current library (curators of its space; superusers; a
    private file's owner). Sealed answers that quoted it read as "source withdrawn"."""

    @extend_schema_serializer(component_name="DocumentWithdrawInput")
    class InputSerializer(StrictSerializer):
        reason = TextField(
            required=False, allow_blank=True, default="", max_length=WITHDRAW_REASON_MAX
        )

    @extend_schema(request=InputSerializer, responses=DocumentDetailOutput)
    def post(self, request: Request, document_id: str) -> Response:
        document = document_get_for_user(user=request.user, document_id=document_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        document = document_withdraw(
            user=request_user(request), document=document, reason=data.validated_data["reason"]
        )
        return Response(DocumentDetailOutput(_with_revisions(document)).data)


class DocumentRestoreApi(APIView):
    """Bring a withdrawn document back into the current library (same roles)."""

    @extend_schema(request=None, responses=DocumentDetailOutput)
    def post(self, request: Request, document_id: str) -> Response:
        document = document_get_for_user(user=request.user, document_id=document_id)
        document = document_restore(user=request_user(request), document=document)
        return Response(DocumentDetailOutput(_with_revisions(document)).data)


class RevisionEraseApi(APIView):
    """Erase one revision's text for good, with a reason in the erasure log (curators of
    the document's space, superusers; a private file's owner). See docs/erasure.md."""

    @extend_schema_serializer(component_name="RevisionEraseInput")
    class InputSerializer(StrictSerializer):
        reason = TextField(max_length=ERASE_REASON_MAX)

    @extend_schema(request=InputSerializer, responses={200: ErasureOutput, **CONFLICT})
    def post(self, request: Request, document_id: str, revision_id: str) -> Response:
        document = document_get_for_user(user=request.user, document_id=document_id)
        revision = revision_of_document(document=document, revision_id=revision_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        erasure = revision_erase(
            user=request_user(request),
            document=document,
            revision=revision,
            reason=data.validated_data["reason"],
        )
        return Response(ErasureOutput(erasure).data)


class DocumentTextApi(APIView):
    @extend_schema(
        responses={
            200: DocumentTextOutput,
            410: OpenApiResponse(description="The current revision's text was erased."),
        }
    )
    def get(self, request: Request, document_id: str) -> Response:
        document = document_get_for_user(user=request.user, document_id=document_id)
        extraction = document_admitted_text(document=document)
        erasure = Erasure.objects.filter(revision_id=document.current_revision_id).first()
        if erasure is not None:
            raise GoneError(
                f"The current revision's text was erased on {erasure.erased_at:%Y-%m-%d}.",
                code="source_erased",
            )
        if extraction is None:
            raise NotFoundError("No admitted text for this document yet.", code="no_admitted_text")
        return Response(
            {
                "document": document.pk,
                "revision": extraction.revision_id,
                "role": extraction.role,
                "extractor": extraction.extractor,
                "text_sha256": extraction.text_sha256,
                "text": extraction.text,
            }
        )


class SearchApi(APIView):
    """Raw retrieval results for inspection. They are `unverified`: not an answer."""

    @extend_schema_serializer(component_name="SearchInput")
    class InputSerializer(serializers.Serializer):
        q = serializers.CharField(max_length=2000)
        space = serializers.ListField(child=ObjectIdField(), required=False, max_length=100)
        tools = serializers.CharField(required=False, default=",".join(RETRIEVAL_TOOLS))
        limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=50)

        def validate_tools(self, value: str) -> tuple[str, ...]:
            names = tuple(name.strip() for name in value.split(",") if name.strip())
            unknown = sorted(set(names) - set(RETRIEVAL_TOOLS))
            if unknown or not names or len(set(names)) != len(names):
                raise serializers.ValidationError(
                    f"Give distinct tools among {', '.join(RETRIEVAL_TOOLS)}."
                )
            return names

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "q",
                {"type": "string", "minLength": 1, "maxLength": 2000, "pattern": TEXT_NOT_BLANK},
                required=True,
                description="The search text.",
            ),
            OpenApiParameter(
                "space",
                {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1, "maximum": MAX_ID},
                    "maxItems": 100,
                },
                description="Limit to these spaces.",
            ),
            OpenApiParameter(
                "tools",
                {
                    "type": "array",
                    "items": {"type": "string", "enum": list(RETRIEVAL_TOOLS)},
                    "minItems": 1,
                    "uniqueItems": True,
                },
                style="form",
                explode=False,
                description="Comma-separated retrieval tools (default: all).",
            ),
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": 50},
                description="1 to 50 results (default 10).",
            ),
        ],
        responses=SearchOutput,
    )
    def get(self, request: Request) -> Response:
        params = {
            "q": request.query_params.get("q", ""),
            "space": request.query_params.getlist("space"),
        }
        if "tools" in request.query_params:
            params["tools"] = request.query_params["tools"]
        if "limit" in request.query_params:
            params["limit"] = request.query_params["limit"]
        data = self.InputSerializer(data=params)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        scope = access_scope_build(user=request.user, space_ids=values.get("space"))
        result = retrieve(
            scope=scope, query=values["q"], tools=values["tools"], limit=values["limit"]
        )
        return Response(
            {
                "label": "unverified",
                "results": [candidate.__dict__ for candidate in result.candidates],
                "outcomes": [outcome.as_dict() for outcome in result.outcomes],
            }
        )
