from answers.models import AnswerRun
from audit.models import AnswerAudit, OutputRelease
from audit.services import release_summary


def run_audit(*, run: AnswerRun) -> dict:
    """The audit of a run the caller may read. `output_release` appears for a
    generation only when a release row exists for it: it is read, never inferred."""
    audit = AnswerAudit.objects.filter(run=run).first()
    releases = {
        release.message.generation.number: release
        for release in OutputRelease.objects.filter(run=run).select_related("message__generation")
        if release.message.generation_id is not None
    }
    generations = []
    for entry in audit.generations if audit else []:
        item = dict(entry)
        item.pop("release_id", None)
        if entry["number"] in releases:
            item["output_release"] = release_summary(releases[entry["number"]])
        generations.append(item)
    return {
        "run_id": str(run.pk),
        "question": run.question,
        "mode": run.mode,
        "policy": run.policy,
        "plan": audit.plan if audit else run.plan,
        "memories_used": audit.memories_used if audit else [],
        "generations": generations,
    }


def run_release(*, run: AnswerRun, release_id: object) -> OutputRelease | None:
    """One release of a run the caller may read (the run came from a scoped selector)."""
    return OutputRelease.objects.filter(run=run, pk=release_id).first()
