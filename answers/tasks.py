import contextlib

from celery import shared_task


@shared_task(name="answers.run_execute", ignore_result=True)
def run_execute_task(run_id: str, generation: int) -> None:
    """Execute a stored run in the worker (streamed answers). A failure is recorded on
    the run by run_execute itself (status, `failed` event); nothing to raise here."""
    from answers.pipeline.events import ChannelsSink
    from answers.pipeline.run import RunFailed, run_execute

    with contextlib.suppress(RunFailed):
        run_execute(run_id=run_id, generation=generation, events=ChannelsSink())
