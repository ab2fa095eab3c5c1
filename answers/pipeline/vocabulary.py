"""The answer vocabulary, declared once: the words a request, a body and the steps of the
answer path share (`Literal`s), the typed request, and the values the steps pass each other
(`Plan` and its `DatasetQuery`s, `Citation`, `Card`, `SourceRef`, `Outcome`, and what a
model provider is shown and told: `DatasetInfo`, `CandidateView`, `Rejection`).

The ground floor of `answers.pipeline`: it imports no pipeline module (import-linter) and
names no `Any` (mypy, `disallow_any_explicit`). What the edges accept is derived from it —
the serializers' choices, the MCP tool's enums, the retrieval depths (`tools.DEPTH`, one per
`Mode`) — and a test compares each with `get_args` of its `Literal`, never a second list."""

from dataclasses import asdict, dataclass, field
from typing import Literal, NotRequired, TypedDict, get_args

from answers.judge.lexical import PLAN_STOPWORDS, content_words
from core.outcomes import OutcomeRecord, ToolOutcome
from core.outcomes import OutcomeState as OutcomeState
from outside.references import SnapshotReference

# What is asked: how hard to look (quick … deep), an agent, or inspection output.
Mode = Literal["ask", "quick", "pro", "deep", "agent", "plan", "debug", "raw"]
# Modes that decide their own retrieval: an explicit policy would be ignored, so it is refused.
SelfRetrievingMode = Literal["agent", "plan", "debug", "raw"]
# What an agent's tool (MCP `answer`) may ask for: the modes whose body is a sealed answer
# (not `plan`/`raw` inspection output) and that run no agent of their own. Debug is among
# them: who may run it is the service's rule (`answer_mode_check`).
ToolAnswerMode = Literal["ask", "quick", "pro", "deep", "debug"]
# What an evidence policy requires of the evidence (SPEC §5 `evidence_policy.mode`: the
# request's `mode` is the other word, so in code the policy's is its rule).
EvidenceRule = Literal["auto", "strict", "general_knowledge"]
ToolName = Literal[
    "vector_search",
    "keyword_search",
    "dataset_query",
    "retrieval_endpoint",
    "federated_rag",
    "web_search",
    "fetch_url",
    "mcp_search",
]
EvidenceStatus = Literal[
    "available", "absent", "partial", "unavailable", "not_requested", "unknown"
]
AnswerStatus = Literal["evidence_backed", "partial", "general_knowledge", "unverified", "abstained"]
Completeness = Literal["complete", "partial", "none"]
# Why a fixed text replaces an answer (the kinds of `texts.explanation`): a refusal's, or a
# sealed answer's notice once a source it quoted was withdrawn.
RefusalReason = Literal[
    "insufficient_evidence", "access_failure", "indexing", "source_withdrawn", "unsupported"
]
# What a release records: an answer or a fixed refusal.
ReleaseKind = Literal["answer", "refusal"]
# How a generation ends: a release's kind, or None for inspection output (no release).
EndingKind = ReleaseKind | None
CitationKind = Literal["quote", "value"]
# A source's stance on a comparison's claim (the model's reading; its quote is verified).
SourceStance = Literal["agrees", "disagrees", "partly"]
# Where a search retrieval runs came from (`Plan.queries`).
SearchOrigin = Literal["planned", "asked", "rewritten", "memory"]
# One tool's outcome: the retrieval channels' type (core.outcomes), named here for the steps.
Outcome = OutcomeRecord

MODES: tuple[Mode, ...] = get_args(Mode)
TOOL_ANSWER_MODES: tuple[ToolAnswerMode, ...] = get_args(ToolAnswerMode)
SELF_RETRIEVING_MODES: tuple[SelfRetrievingMode, ...] = get_args(SelfRetrievingMode)
EVIDENCE_RULES: tuple[EvidenceRule, ...] = get_args(EvidenceRule)
TOOL_NAMES: tuple[ToolName, ...] = get_args(ToolName)
IMPLEMENTED_TOOLS: tuple[ToolName, ...] = ("vector_search", "keyword_search", "dataset_query")
EVIDENCE_STATUSES: tuple[EvidenceStatus, ...] = get_args(EvidenceStatus)
ANSWER_STATUSES: tuple[AnswerStatus, ...] = get_args(AnswerStatus)
RELEASE_KINDS: tuple[ReleaseKind, ...] = get_args(ReleaseKind)
CITATION_KINDS: tuple[CitationKind, ...] = get_args(CitationKind)
SEARCH_ORIGINS: tuple[SearchOrigin, ...] = get_args(SearchOrigin)
SOURCE_STANCES: tuple[SourceStance, ...] = get_args(SourceStance)


def outcome(
    tool: str, state: OutcomeState, code: str, result_count: int = 0, retryable: bool = False
) -> Outcome:
    return ToolOutcome(tool, state, code, result_count, retryable).as_dict()


def mode_of(value: object) -> Mode | None:
    """`value` as a `Mode`, or None if it is not one."""
    return next((mode for mode in MODES if mode == value), None)


def evidence_rule_of(value: object) -> EvidenceRule | None:
    """`value` as an `EvidenceRule`, or None if it is not one."""
    return next((rule for rule in EVIDENCE_RULES if rule == value), None)


class PolicyRecord(TypedDict):
    """An evidence policy as stored on the run and returned in `evidence.policy`; an
    answer's also names the operating point its quotes were judged at (sealed)."""

    mode: EvidenceRule
    allowed_tools: list[str]
    required_tools: list[str]
    operating_point: NotRequired[float]


@dataclass(frozen=True)
class EvidencePolicy:
    rule: EvidenceRule = "auto"
    allowed_tools: tuple[str, ...] = IMPLEMENTED_TOOLS
    required_tools: tuple[str, ...] = ()
    explicit: bool = False

    def as_dict(self) -> PolicyRecord:
        return {
            "mode": self.rule,
            "allowed_tools": list(self.allowed_tools),
            "required_tools": list(self.required_tools),
        }


@dataclass(frozen=True)
class AnswerRequest:
    """The answer request (SPEC §5) once validated (`request.answer_request_parse`)."""

    query: str
    mode: Mode
    policy: EvidencePolicy
    conversation_id: int | None
    space_ids: list[int]
    selected_sources: list[int]
    language: str | None
    stream: bool = False
    stream_version: str | None = None
    # Pages the asker chose for `fetch_url` to read (issue 50).
    urls: tuple[str, ...] = ()


class RestrictionRecord(TypedDict):
    """A governed query's condition as recorded (`restrictions.Restriction.as_dict`)."""

    column: str | None
    op: str
    value: str | float | None


class DatasetQuery(TypedDict):
    """A governed query a plan runs: on which snapshot, the SQL, the restrictions it was
    built with, and the part of the question it answers (None: the whole question)."""

    dataset_id: int
    snapshot_id: int
    sql: str
    restrictions: list[RestrictionRecord]
    part: int | None


class Column(TypedDict):
    """A column of a snapshot's schema, as its upload recorded it."""

    name: str
    type: str  # DuckDB's type name


@dataclass(frozen=True)
class DatasetInfo:
    """What a planner knows of a dataset it may query: its current snapshot's table and
    columns (`tools.dataset_info`)."""

    dataset_id: int
    snapshot_id: int
    name: str
    table: str
    columns: list[Column]
    # Text column → its distinct values, for columns with few of them (computed at upload).
    dictionary: dict[str, list[str]] = field(default_factory=dict)


class SteeringWhy(TypedDict):
    scope: str
    shared: list[str]
    relevance: float


class MemorySteering(TypedDict):
    """A memory entry that steers the searches of some parts with its words; the words are
    searched, never judged, and never stored (`Plan.as_dict`)."""

    id: int
    kind: str
    scope: str
    parts: list[int]
    words: list[str]
    why: SteeringWhy


@dataclass(frozen=True)
class Plan:
    """What to search for. `searches` are the parts of the question: each is judged and
    answered on its own. When the question was rewritten from the conversation, `asked`
    holds, per part, the part as typed: it is searched (first) and judged too, so that a
    wrong rewrite cannot hide an answer. `memory` lists the entries that steered which
    parts' searches with which words, and why; their words are searched, never judged."""

    standalone: str
    searches: list[str]
    comparison: bool = False
    analysis: bool = False
    rewritten: bool = False
    dataset_queries: list[DatasetQuery] = field(default_factory=list)
    memory: list[MemorySteering] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    question: str = ""  # as typed

    def part_texts(self, part: int) -> list[str]:
        """What a quote for `part` is judged against: the part, and the part as typed."""
        texts = [self.searches[part] if part < len(self.searches) else self.standalone]
        asked = self.asked[part] if part < len(self.asked) else ""
        return [*texts, asked] if asked else texts

    def queries(self) -> list[tuple[int, str, SearchOrigin]]:
        """(part, text, origin) of every search retrieval runs, in order: for a rewritten
        part the part as typed first ("asked"), then the part ("rewritten" or "planned")
        with the words of the memory entries that steer it ("memory")."""
        queries: list[tuple[int, str, SearchOrigin]] = []
        for part, search in enumerate(self.searches):
            asked = self.asked[part] if part < len(self.asked) else ""
            if asked:
                queries.append((part, asked, "asked"))
            present = set(content_words(search, stopwords=PLAN_STOPWORDS))
            extra = [
                word
                for entry in self.memory
                if part in entry.get("parts", ())
                for word in entry.get("words", ())
                if word not in present
            ]
            origin: SearchOrigin = "rewritten" if asked else "planned"
            if extra:
                search, origin = f"{search} {' '.join(dict.fromkeys(extra))}", "memory"
            queries.append((part, search, origin))
        return queries

    def as_dict(self) -> dict[str, object]:
        """The plan as stored (run, audit, receipt). Words memory added are recorded by
        entry id, never as text: a remembered quote's words must not outlive access to
        its source in a record."""
        data = asdict(self)
        data["memory"] = [
            {key: value for key, value in entry.items() if key != "words"} for entry in self.memory
        ]
        queries: list[dict[str, object]] = []
        for part, text, origin in self.queries():
            if origin == "memory":
                steering = [e["id"] for e in self.memory if part in e.get("parts", ())]
                queries.append(
                    {
                        "part": part,
                        "text": self.searches[part],
                        "origin": origin,
                        "memory": steering,
                    }
                )
            else:
                queries.append({"part": part, "text": text, "origin": origin})
        data["queries"] = queries
        return data


@dataclass(frozen=True)
class CandidateView:
    """What a provider is shown of a candidate fact (`candidates.candidate_views`)."""

    fact_id: str
    kind: str
    text: str
    label: str
    searches: tuple[int, ...]  # the plan's searches that found it (for a value: its part)
    score: float
    headings: tuple[str, ...] = ()  # the heading path of a quote's passage
    title: str = ""  # the title of a quote's document
    # A quote's structured units (knowledge.units): (start, end, alone_start, alone_end) in
    # `text`; the part from alone_start to alone_end is never quoted without the rest.
    units: tuple[tuple[int, int, int, int], ...] = ()


@dataclass(frozen=True)
class Rejection:
    """A selected item that failed, and why, as a typed code: what a provider is told
    when it selects again. Never the document's text."""

    fact_id: str
    start: int | None
    end: int | None
    reason: str  # judge_unsupported | label_only | …


class QuoteCitation(TypedDict):
    """A quote an answer cites: its number in the text, the fact, where it was read."""

    number: int
    fact_id: str
    kind: Literal["quote"]
    document_id: int
    title: str
    revision_id: int
    revision_number: int
    revision_date: str  # ISO date of the revision
    locator: dict[str, object]
    availability: Literal["current", "superseded"]
    quote: str
    # A quote from an outside channel's snapshot: the channel, the remote identity, when it
    # was fetched and the stored bytes' SHA-256.
    outside: NotRequired[SnapshotReference]


class ValueCitation(TypedDict):
    """A verified value an answer cites: the governed query and snapshot it came from."""

    number: int
    fact_id: str
    kind: Literal["value"]
    dataset_id: int
    dataset: str
    snapshot_id: int
    snapshot_version: int
    snapshot_sha256: str
    query_id: int
    result_sha256: str
    label: str
    value: object


Citation = QuoteCitation | ValueCitation


class RevisionSource(TypedDict):
    """A document revision an answer quoted."""

    type: Literal["revision"]
    id: int
    document_id: int
    # The revision is an outside snapshot's: which one, and the stored bytes' SHA-256 (the
    # receipt's source references carry it).
    snapshot_id: NotRequired[int]
    snapshot_sha256: NotRequired[str]


class SnapshotSource(TypedDict):
    """A dataset snapshot an answer's values came from."""

    type: Literal["snapshot"]
    id: int
    dataset_id: int


SourceRef = RevisionSource | SnapshotSource


class ValueCard(TypedDict):
    """A value beside an answer, with its lineage (the cells it was computed from)."""

    kind: Literal["value"]
    label: str
    value: object
    lineage: object
    snapshot_id: int
    snapshot_sha256: str


class StanceRef(TypedDict):
    stance: SourceStance
    citation: int  # the quote's citation number
    document_id: int


class ComparisonClaim(TypedDict):
    claim: str  # the model's words, labelled so
    stances: list[StanceRef]


class ComparisonCard(TypedDict):
    """A comparison's claims, each with the cited quotes that take a stance on it."""

    kind: Literal["comparison"]
    label: Literal["model_analysis"]
    claims: list[ComparisonClaim]


Card = ValueCard | ComparisonCard
