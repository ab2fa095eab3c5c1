"""The grounded strategy: gather, select and judge quotes and values, then answer what the
evidence policy allows (or a fixed refusal)."""

from answers.pipeline.contracts import Decision, RunContext, Trace
from answers.pipeline.endings import gathered_decision
from answers.pipeline.gathering import gather_step
from answers.pipeline.vocabulary import Plan


def decide(ctx: RunContext, trace: Trace, plan: Plan) -> Decision:
    return gathered_decision(ctx, trace, gather_step(ctx, trace, plan))
