"""Evidence policies (SPEC §5): parsing, validation and judging the outcome."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from answers.pipeline.vocabulary import (
    EVIDENCE_RULES,
    IMPLEMENTED_TOOLS,
    SELF_RETRIEVING_MODES,
    TOOL_NAMES,
    AnswerStatus,
    Completeness,
    EvidencePolicy,
    EvidenceStatus,
    Mode,
    Outcome,
    PolicyRecord,
    RefusalReason,
    evidence_rule_of,
)
from core.errors import UnprocessableError
from knowledge.retrieval import INDEXING


def _tool_list(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UnprocessableError(
            "Tool lists are arrays of tool names.",
            code="invalid_policy",
            fields={f"evidence_policy.{name}": "Must be an array of strings."},
        )
    unknown = sorted(set(value) - set(TOOL_NAMES))
    if unknown:
        raise UnprocessableError(
            f"Unknown tool: {', '.join(unknown)}.",
            code="invalid_policy",
            fields={f"evidence_policy.{name}": f"Unknown: {', '.join(unknown)}."},
        )
    if len(set(value)) != len(value):
        raise UnprocessableError(
            "A tool is named twice.",
            code="invalid_policy",
            fields={f"evidence_policy.{name}": "Tool names must be unique."},
        )
    return tuple(value)


def policy_parse(raw: object, *, mode: Mode) -> EvidencePolicy:
    """The request's evidence policy, or the default; UnprocessableError (422) if invalid."""
    if raw is None:
        return EvidencePolicy()
    if mode in SELF_RETRIEVING_MODES:
        raise UnprocessableError(
            f"Mode {mode!r} does not accept an explicit evidence policy.",
            code="invalid_policy",
            fields={"evidence_policy": f"Not allowed with mode {mode!r}."},
        )
    if not isinstance(raw, dict):
        raise UnprocessableError(
            "The evidence policy must be an object.",
            code="invalid_policy",
            fields={"evidence_policy": "Must be an object."},
        )
    extra = sorted(set(raw) - PolicyRecord.__required_keys__)
    if extra:
        raise UnprocessableError(
            f"Unknown policy field: {', '.join(extra)}.",
            code="invalid_policy",
            fields={f"evidence_policy.{extra[0]}": "Unknown field."},
        )
    rule = evidence_rule_of(raw.get("mode", "auto"))
    if rule is None:
        raise UnprocessableError(
            "Unknown policy mode.",
            code="invalid_policy",
            fields={"evidence_policy.mode": f"One of {', '.join(EVIDENCE_RULES)}."},
        )
    allowed = _tool_list(raw.get("allowed_tools", list(IMPLEMENTED_TOOLS)), "allowed_tools")
    required = _tool_list(raw.get("required_tools", []), "required_tools")
    if not set(required) <= set(allowed):
        raise UnprocessableError(
            "Every required tool must also be allowed.",
            code="invalid_policy",
            fields={"evidence_policy.required_tools": "Must be a subset of allowed_tools."},
        )
    if rule == "general_knowledge" and required:
        raise UnprocessableError(
            "A general-knowledge answer cannot require tools.",
            code="invalid_policy",
            fields={"evidence_policy.required_tools": "Must be empty for general_knowledge."},
        )
    if rule == "strict" and not allowed:
        raise UnprocessableError(
            "A strict policy needs at least one allowed tool.",
            code="invalid_policy",
            fields={"evidence_policy.allowed_tools": "Must not be empty for strict."},
        )
    return EvidencePolicy(rule, allowed, required, explicit=True)


@dataclass
class Judgement:
    """What the evidence allows: publish the selection, or which fixed text instead."""

    publish: bool
    evidence_status: EvidenceStatus
    answer_status: AnswerStatus
    completeness: Completeness
    explanation: RefusalReason | None = None
    issues: list[str] = field(default_factory=list)

    @property
    def refusal(self) -> RefusalReason:
        """The explanation of a judgement that does not publish (the fixed text's kind)."""
        if self.explanation is None:
            raise ValueError("a judgement that publishes has no explanation")
        return self.explanation


def policy_judge(
    *,
    policy: EvidencePolicy,
    outcomes: Sequence[Outcome],
    selected_tools: list[set[str]],
    unanswered_parts: int = 0,
) -> Judgement:
    """Apply SPEC §5 to the tool outcomes and the tools behind each selected fact.

    `selected_tools` holds, per selected fact, the tools that produced it;
    `unanswered_parts` counts the parts of the question with no supported evidence: an
    answer to some parts only is `partial`, never silently complete.
    """
    failed = {
        o["tool"]
        for o in outcomes
        if o["state"] == "failed" and o["code"] not in {"not_configured", INDEXING}
    }
    # A channel still catching up (passages waiting for their vectors) is incomplete, not
    # failed: its refusal says so, never that a source could not be accessed.
    indexing = {o["tool"] for o in outcomes if o["code"] == INDEXING} - failed
    unconfigured = {o["tool"] for o in outcomes if o["code"] == "not_configured"}
    has_evidence = bool(selected_tools)
    evidence_tools = set().union(*selected_tools) if selected_tools else set()
    unmet = [
        tool
        for tool in policy.required_tools
        if tool not in evidence_tools or tool in failed | indexing or tool in unconfigured
    ]
    issues = [f"required_tool_unmet:{tool}" for tool in unmet]
    issues += [f"tool_failed:{tool}" for tool in sorted(failed)]
    issues += [f"tool_indexing:{tool}" for tool in sorted(indexing)]
    if unanswered_parts and selected_tools:
        issues.append("unanswered_part")

    if policy.rule == "strict":
        if failed or indexing or unmet or not has_evidence:
            explanation: RefusalReason
            if failed and not has_evidence:
                explanation = "access_failure"
            elif indexing and not failed:
                explanation = "indexing"
            else:
                explanation = "insufficient_evidence"
            status: EvidenceStatus = "unavailable" if failed or indexing else "absent"
            return Judgement(False, status, "abstained", "none", explanation, issues)
        if unanswered_parts:
            return Judgement(True, "partial", "partial", "partial", None, issues)
        return Judgement(True, "available", "evidence_backed", "complete", None, issues)

    if not has_evidence:
        if failed:
            return Judgement(False, "unavailable", "abstained", "none", "access_failure", issues)
        if indexing:
            return Judgement(False, "unavailable", "abstained", "none", "indexing", issues)
        return Judgement(False, "absent", "abstained", "none", "insufficient_evidence", issues)
    if failed or indexing or unmet or unanswered_parts:
        return Judgement(True, "partial", "partial", "partial", None, issues)
    return Judgement(True, "available", "evidence_backed", "complete", None, issues)
