from django.apps import AppConfig

from core.health import health_checks
from core.worker import sweep_steps


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        # Inside ready(): these modules import the app's models, which load after the apps.
        # `tasks` registers the Celery tasks the services queue by name (core.queue.task_named).
        from audit import health, services, tasks  # noqa: F401

        # A release sealed while the broker was down is integrated after the next sweep. The
        # sweep only queues the task: integrating in the heartbeat thread could outlast
        # the worker's heartbeat.
        sweep_steps.add(services.log_integration_queue, order=40)
        health_checks.add(health.check_answer_log, order=40)
