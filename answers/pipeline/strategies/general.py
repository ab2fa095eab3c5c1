"""`general_knowledge` with a generative provider: the model's short answer under a fixed
label, no retrieval, no sources or citations; sealed like any answer."""

import time

from answers.pipeline import texts
from answers.pipeline.contracts import Decision, Ending, RunContext, Trace
from answers.pipeline.endings import abstention
from answers.pipeline.providers.llm import ProviderError
from answers.pipeline.vocabulary import Plan


def decide(ctx: RunContext, trace: Trace, plan: Plan | None) -> Decision:
    """`general_knowledge` with a generative provider: the model's short answer under a fixed
    label, no retrieval, no sources or citations; sealed like any answer."""
    started = time.perf_counter()
    try:
        text = ctx.provider.answer_generally(question=ctx.request.query, language=ctx.language)
    except ProviderError as error:
        ending = abstention(
            ctx, trace, "unsupported", evidence_status="not_requested", issues=(error.code,)
        )
        return Decision(ending, (), 1, (error.code,))
    trace.step("general_knowledge", started)
    ending = Ending(
        kind="answer",
        text=f"{texts.general_knowledge_label(ctx.language)}\n{text}",
        evidence={
            "status": "not_requested",
            "answer_status": "general_knowledge",
            "sources": [],
            "outcomes": list(trace.outcomes),
        },
        quality={"completeness": "complete", "degraded": False, "issues": []},
    )
    return Decision(ending, (), 1)
