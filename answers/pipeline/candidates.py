"""What a model provider is shown of the candidate facts a run recorded (`candidate_views`),
and which of them may never be selected (`value_unmet`). Shared by gathering,
selection and the comparison's analysis; reads only the recorded facts."""

from answers.models import CandidateFact
from answers.pipeline.vocabulary import CandidateView


def value_unmet(fact: CandidateFact) -> bool:
    return fact.kind == "value" and bool(fact.source.get("unmet"))


def _searches(fact: CandidateFact) -> tuple[int, ...]:
    if fact.kind == "value":
        part = fact.source.get("part")
        return () if part is None else (part,)
    return tuple(fact.source.get("searches", ()))


def candidate_views(facts: list[CandidateFact]) -> list[CandidateView]:
    return [
        CandidateView(
            fact.fact_id,
            fact.kind,
            fact.text if fact.kind == "quote" else str(fact.value),
            fact.label,
            _searches(fact),
            fact.source.get("score", 1.0),
            tuple((fact.source.get("locator") or {}).get("headings", ())),
            fact.source.get("title", ""),
            tuple((a, b, c, d) for a, b, c, d in fact.source.get("units", ())),
        )
        for fact in facts
        if not value_unmet(fact)
    ]
