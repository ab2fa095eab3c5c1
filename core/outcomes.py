"""One tool's outcome (SPEC §5), the one shape retrieval reports and the answer path, the
audit and a stream event carry. Here, below `knowledge`, so that the retrieval channels and
the answer vocabulary (`answers.pipeline.vocabulary`) name the same type."""

from dataclasses import dataclass
from typing import Literal, TypedDict

OutcomeState = Literal["succeeded", "failed"]


@dataclass(frozen=True)
class ToolOutcome:
    """One tool's outcome (SPEC §5 outcome codes: matched, empty_corpus, no_relevant_hit,
    embedding_*, timeout, not_configured, …, and `indexing`)."""

    tool: str
    state: OutcomeState
    code: str
    result_count: int = 0
    retryable: bool = False

    def as_dict(self) -> "OutcomeRecord":
        return {
            "tool": self.tool,
            "state": self.state,
            "code": self.code,
            "result_count": self.result_count,
            "retryable": self.retryable,
        }


class OutcomeRecord(TypedDict):
    """A tool outcome as a body, the audit and a stream event carry it."""

    tool: str
    state: OutcomeState
    code: str
    result_count: int
    retryable: bool
