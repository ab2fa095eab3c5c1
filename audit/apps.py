from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from audit.log import log_integrate_all
        from core.worker import sweep_steps

        # A release sealed while the broker was down is integrated by the next sweep.
        sweep_steps.add(log_integrate_all, order=40)
