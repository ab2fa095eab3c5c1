import contextlib
from uuid import UUID

from celery import Task, shared_task

from answers.pipeline.events import ChannelsSink
from answers.pipeline.lifecycle import AlreadyExecuted, RunFailed, run_execute
from answers.question_sets.services import question_set_run_execute
from core.worker import worker_claim_name


@shared_task(name="answers.run_execute", ignore_result=True, bind=True)
def run_execute_task(self: Task, run_id: str, generation: int) -> None:
    """Execute a stored run in the worker (streamed answers). A failure is recorded on
    the run by run_execute itself (status, `failed` event); nothing to raise here."""
    # A delivered-again task (acks_late) finds its generation taken: nothing to do.
    with contextlib.suppress(RunFailed, AlreadyExecuted):
        run_execute(
            run_id=UUID(run_id),
            generation=generation,
            events=ChannelsSink(),
            worker=worker_claim_name(self.request.hostname or ""),
        )


@shared_task(name="answers.question_set_run", ignore_result=True)
def question_set_run_task(run_id: int) -> None:
    """Ask a question set's questions (answers.question_sets.services)."""
    question_set_run_execute(run_id=run_id)
