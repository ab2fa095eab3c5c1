from django.apps import AppConfig

from core.health import documents_being_indexed, health_checks
from core.worker import sweep_steps


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        # Inside ready(): these modules import the app's models, which load after the apps.
        # `tasks` registers the Celery tasks the services queue by name (core.queue.task_named).
        from knowledge import health, selectors, tasks  # noqa: F401
        from knowledge.documents import embedding, extraction

        sweep_steps.add(extraction.extractions_recover, order=10)
        sweep_steps.add(embedding.embeddings_resume, order=20)
        sweep_steps.add(embedding.embeddings_refresh_schedule, order=40)
        health_checks.add(health.check_extractions, order=10)
        health_checks.add(health.check_embeddings, order=20)
        documents_being_indexed.provide(selectors.documents_being_indexed)
