from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from audit.health import check_answer_log
        from audit.services import log_integration_queue
        from core.health import health_checks
        from core.worker import sweep_steps

        # A release sealed while the broker was down is integrated after the next sweep. The
        # sweep only queues the task: integrating in the heartbeat thread could outlast
        # the worker's heartbeat.
        sweep_steps.add(log_integration_queue, order=40)
        health_checks.add(check_answer_log, order=40)
