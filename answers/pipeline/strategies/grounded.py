"""The grounded strategy: gather, select and judge quotes and values, then answer what the
evidence policy allows (or a fixed refusal)."""

from answers.pipeline.contracts import Decision, Gathered, RunContext, Trace
from answers.pipeline.endings import abstention, answered
from answers.pipeline.gathering import gather_step
from answers.pipeline.policy import policy_judge
from answers.pipeline.vocabulary import Plan


def decide(ctx: RunContext, trace: Trace, plan: Plan) -> Decision:
    return gathered_decision(ctx, trace, gather_step(ctx, trace, plan))


def gathered_decision(ctx: RunContext, trace: Trace, gathered: Gathered) -> Decision:
    """How a generation ends from what the tools found and what was selected from it."""
    found = gathered.candidates
    issues = gathered.issues
    if gathered.judge_unavailable:
        ending = abstention(
            ctx,
            trace,
            "unsupported",
            evidence_status="unavailable",
            issues=(*issues, "judge_unavailable"),
        )
        return Decision(ending, found, gathered.attempts, issues, gathered.plans)

    support = gathered.support
    selected = list(support.kept) if support is not None else []
    judgement = policy_judge(
        policy=ctx.request.policy,
        outcomes=trace.outcomes,
        selected_tools=[set(s.fact.contributions) for s in selected],
        unanswered_parts=len(support.unanswered) if support is not None and selected else 0,
    )
    if not judgement.publish:
        ending = abstention(ctx, trace, judgement.refusal, judgement=judgement, issues=issues)
    else:
        ending = answered(ctx, trace, selected, judgement, issues)
    return Decision(ending, found, gathered.attempts, issues, gathered.plans)
