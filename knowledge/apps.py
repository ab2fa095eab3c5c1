from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from core.health import documents_being_indexed, health_checks
        from core.worker import sweep_steps
        from knowledge.documents import (
            embeddings_refresh_schedule,
            embeddings_resume,
            extractions_recover,
        )
        from knowledge.health import check_embeddings, check_extractions
        from knowledge.selectors import documents_being_indexed as being_indexed

        sweep_steps.add(extractions_recover, order=10)
        sweep_steps.add(embeddings_resume, order=20)
        sweep_steps.add(embeddings_refresh_schedule, order=40)
        health_checks.add(check_extractions, order=10)
        health_checks.add(check_embeddings, order=20)
        documents_being_indexed.provide(being_indexed)
