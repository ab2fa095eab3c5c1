from django.apps import AppConfig


class AnswersConfig(AppConfig):
    name = "answers"
    verbose_name = "Answers"

    def ready(self) -> None:
        from answers.boundary import capture_sources_fit
        from answers.health import check_runs
        from answers.recovery import runs_recover
        from answers.selectors import run_capture_current
        from core.health import health_checks
        from core.worker import sweep_steps
        from knowledge import curation

        sweep_steps.add(runs_recover, order=30)
        health_checks.add(check_runs, order=30)
        curation.capture_sources_fit.provide(capture_sources_fit)
        curation.capture_current.provide(run_capture_current)
