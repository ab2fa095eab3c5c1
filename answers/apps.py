from django.apps import AppConfig

from core.health import health_checks
from core.worker import sweep_steps


class AnswersConfig(AppConfig):
    name = "answers"
    verbose_name = "Answers"

    def ready(self) -> None:
        # Inside ready(): these modules import the apps' models, which load after the apps.
        # `tasks` registers the Celery tasks the services queue by name (core.queue.task_named).
        from answers import boundary, health, recovery, selectors, tasks  # noqa: F401
        from knowledge import curation

        sweep_steps.add(recovery.runs_recover, order=30)
        health_checks.add(health.check_runs, order=30)
        curation.capture_sources_fit.provide(boundary.capture_sources_fit)
        curation.capture_current.provide(selectors.run_capture_current)
