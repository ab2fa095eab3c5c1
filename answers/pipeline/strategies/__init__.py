"""How a generation decides, by what was asked: general knowledge, inspection (plan and raw
modes), a comparison, or a grounded answer. Each strategy returns a `Decision`; nothing is
published here."""

from dataclasses import replace

from answers.pipeline.contracts import Decision, RunContext, Trace
from answers.pipeline.endings import unsupported
from answers.pipeline.gathering import plan_step
from answers.pipeline.strategies import comparison, general, grounded, inspection


def decide(ctx: RunContext, trace: Trace) -> Decision:
    """Everything before publication: how this generation ends."""
    policy = ctx.request.policy
    if policy.rule == "general_knowledge":
        if not ctx.provider.can_answer_generally:
            return Decision(unsupported(ctx, trace, "general_knowledge"))
        return general.decide(ctx, trace, None)
    plan = plan_step(ctx, trace)
    if ctx.request.mode == "plan":
        return inspection.decide(ctx, trace, plan)
    if plan.analysis and not ctx.provider.can_analyse:
        return Decision(unsupported(ctx, trace, "analysis"))
    if plan.comparison:
        if not ctx.provider.can_compare:
            return Decision(unsupported(ctx, trace, "comparison"))
        decided = comparison.decide(ctx, trace, plan)
        # One round, one plan (answer_instead's selection included): audited like any.
        return decided if decided.plans else replace(decided, plans=(plan,))
    if ctx.request.mode == "raw":
        return inspection.decide(ctx, trace, plan)
    return grounded.decide(ctx, trace, plan)
