"""The inspection modes: `plan` shows the plan, `raw` the candidate facts of one round of
tools; both labelled unverified, no prose, no release."""

from answers.pipeline.contracts import Decision, RunContext, Trace
from answers.pipeline.endings import inspection, raw_fact
from answers.pipeline.gathering import tools_step
from answers.pipeline.vocabulary import Plan


def decide(ctx: RunContext, trace: Trace, plan: Plan) -> Decision:
    if ctx.request.mode == "plan":
        return Decision(inspection(trace, plan=plan.as_dict()))
    found = tuple(tools_step(ctx, trace, plan, 0))
    results = [raw_fact(fact) for fact in found]
    return Decision(inspection(trace, results=results), found, plans=(plan,))
