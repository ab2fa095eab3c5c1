"""OpenAPI shapes of the answer API (SPEC §5).

Requests are validated by `answers.pipeline.request.answer_request_parse`, the one parser the
REST API, the CLI and the MCP tools share; `AnswerInput` documents the same contract.
Responses are built by the pipeline; these serializers describe them and never build them.
Citations, cards and sources differ by kind (quote, value, revision, snapshot), so they are
documented as objects whose common keys are named. Every choice is the answer vocabulary's
(`answers.pipeline.vocabulary`), never a second list.
"""

from rest_framework import serializers

from answers.pipeline.request import MAX_QUERY_CHARS, MAX_URLS
from answers.pipeline.texts import LANGUAGES
from answers.pipeline.vocabulary import (
    ANSWER_STATUSES,
    CITATION_KINDS,
    EVIDENCE_RULES,
    EVIDENCE_STATUSES,
    MODES,
    RELEASE_KINDS,
    SEARCH_ORIGINS,
    TOOL_NAMES,
)
from core.inputs import ObjectIdField, StrictSerializer
from knowledge.document_apis import OutcomeOutput
from outside.references import URL_MAX


class EvidencePolicyInput(StrictSerializer):
    mode = serializers.ChoiceField(choices=EVIDENCE_RULES, required=False)
    allowed_tools = serializers.ListField(
        child=serializers.ChoiceField(choices=TOOL_NAMES), required=False
    )
    required_tools = serializers.ListField(
        child=serializers.ChoiceField(choices=TOOL_NAMES), required=False
    )


class AnswerInput(StrictSerializer):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS)
    mode = serializers.ChoiceField(choices=MODES, required=False, default="ask")
    stream = serializers.BooleanField(
        required=False,
        default=False,
        help_text="true: the run executes in the worker and the response is its event stream.",
    )
    stream_version = serializers.ChoiceField(choices=["1"], required=False, allow_null=True)
    conversation_id = ObjectIdField(required=False, allow_null=True)
    space_ids = serializers.ListField(child=ObjectIdField(), required=False, allow_null=True)
    selected_sources = serializers.ListField(child=ObjectIdField(), required=False, allow_null=True)
    urls = serializers.ListField(
        child=serializers.CharField(max_length=URL_MAX),
        required=False,
        allow_null=True,
        max_length=MAX_URLS,
        help_text="Pages for fetch_url to read (http or https; at most 5). An implicit "
        "policy gains fetch_url; an explicit one must allow it. Read only through a fetch_url "
        "channel a curator enabled for one of your spaces; where each points is checked "
        "when it is fetched (docs/channels.md).",
    )
    language = serializers.ChoiceField(choices=LANGUAGES, required=False, allow_null=True)
    evidence_policy = EvidencePolicyInput(required=False, allow_null=True)


class PolicyOutput(serializers.Serializer):
    mode = serializers.ChoiceField(choices=EVIDENCE_RULES)
    allowed_tools = serializers.ListField(child=serializers.CharField())
    required_tools = serializers.ListField(child=serializers.CharField())
    operating_point = serializers.FloatField(
        required=False,
        help_text="An answer's only: the support judge's threshold its quotes were judged at "
        "(the policy's pinned point, or a higher one a curator set on a space it read). "
        "Sealed: part of policy_sha256.",
    )


class CitationOutput(serializers.Serializer):
    number = serializers.IntegerField()
    fact_id = serializers.CharField()
    kind = serializers.ChoiceField(choices=CITATION_KINDS)


class CardOutput(serializers.Serializer):
    kind = serializers.CharField()


class SourceOutput(serializers.Serializer):
    type = serializers.CharField()
    id = serializers.IntegerField()


class AnswerTextOutput(serializers.Serializer):
    text = serializers.CharField(allow_blank=True)
    language = serializers.CharField()
    citations = CitationOutput(many=True)
    cards = CardOutput(many=True)


class EvidenceOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=EVIDENCE_STATUSES)
    answer_status = serializers.ChoiceField(choices=ANSWER_STATUSES)
    policy = PolicyOutput()
    sources = SourceOutput(many=True)
    outcomes = OutcomeOutput(many=True)


class QualityOutput(serializers.Serializer):
    completeness = serializers.CharField()
    degraded = serializers.BooleanField()
    issues = serializers.ListField(child=serializers.CharField())


class PlannedSearchOutput(serializers.Serializer):
    part = serializers.IntegerField()
    text = serializers.CharField()
    origin = serializers.ChoiceField(
        choices=SEARCH_ORIGINS,
        help_text="asked: the part as typed; rewritten: from the conversation; memory: "
        "with words of the memory entries listed (recorded by id, not as text).",
    )
    memory = serializers.ListField(child=serializers.IntegerField(), required=False)


class MemorySteeringOutput(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    scope = serializers.CharField()
    parts = serializers.ListField(child=serializers.IntegerField())
    why = serializers.DictField()


class ReleaseSearchedOutput(serializers.Serializer):
    """What the release searched for when it differs from what was typed (rewritten from
    the conversation, steered by memory); empty lists otherwise, and an empty object for
    releases made before it was recorded."""

    searched_as = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The standalone question when rewritten from the conversation, else empty.",
    )
    searches = PlannedSearchOutput(many=True, required=False)
    memory = MemorySteeringOutput(many=True, required=False)


class ReleaseLogOutput(serializers.Serializer):
    """Where the release stands in the answer log (docs/releases.md), read beside the sealed
    body: not part of what was sealed or hashed."""

    index = serializers.IntegerField(help_text="the release's index in the answer log")
    tree_size = serializers.IntegerField(
        allow_null=True, help_text="the size of the first signed checkpoint covering it"
    )
    checkpoint = serializers.CharField(
        allow_null=True, help_text="that checkpoint's signed note; null until one is signed"
    )


class ReleaseOutput(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=RELEASE_KINDS)
    reset_context = serializers.IntegerField()
    publication_sequence = serializers.IntegerField()
    policy_version = serializers.CharField()
    text_sha256 = serializers.CharField()
    citations_sha256 = serializers.CharField()
    cards_sha256 = serializers.CharField()
    policy_sha256 = serializers.CharField()
    searched = ReleaseSearchedOutput()
    log = ReleaseLogOutput(
        required=False,
        help_text="Once integrated into the answer log, wherever the release is returned "
        "(runs, conversations, exports, the MCP answer tool); never sealed.",
    )


class AnswerOutput(serializers.Serializer):
    """The response body; HTTP 200 alone proves nothing, read `evidence`."""

    run_id = serializers.UUIDField()
    generation = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=MODES)
    answer = AnswerTextOutput()
    evidence = EvidenceOutput()
    quality = QualityOutput()
    release = ReleaseOutput(allow_null=True, help_text="null: no verified release recorded.")
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["unverified"], required=False, help_text="plan and raw modes only."
    )
    plan = serializers.DictField(required=False, help_text="plan mode only.")
    results = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="raw mode only."
    )
    trace = serializers.DictField(required=False, help_text="debug mode (staff) only.")


class AuditGenerationOutput(serializers.Serializer):
    number = serializers.IntegerField()
    plans = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Every round's plan, the first first (agent mode broadens it).",
    )
    output_release = ReleaseOutput(
        required=False, help_text="Present only when a release row exists for the generation."
    )


class AuditOutput(serializers.Serializer):
    run_id = serializers.UUIDField()
    question = serializers.CharField()
    mode = serializers.ChoiceField(choices=MODES)
    policy = serializers.DictField()
    plan = serializers.DictField(allow_null=True)
    memories_used = serializers.ListField(child=serializers.DictField())
    generations = AuditGenerationOutput(many=True)
