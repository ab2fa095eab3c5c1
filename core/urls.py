from django.urls import path

from core.apis import HealthApi

urlpatterns = [path("health", HealthApi.as_view(), name="health")]
