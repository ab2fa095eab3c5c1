"""Model providers (`base.ModelProvider`): the extractive one that needs no model
(`extractive`), the OpenAI-compatible one (`openai`, over `llm`'s HTTP client with
`structured` outputs), and the factory the settings choose between."""

from django.conf import settings

from answers.pipeline.providers.base import ModelProvider
from answers.pipeline.providers.extractive import ExtractiveProvider
from answers.pipeline.providers.openai import openai_provider_from_settings


def get_model_provider() -> ModelProvider:
    if settings.KOINON_MODEL_PROVIDER == "openai":
        return openai_provider_from_settings()
    return ExtractiveProvider()
