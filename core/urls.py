from django.urls import path

from core.apis import ApiRootApi, HealthApi

urlpatterns = [
    path("", ApiRootApi.as_view(), name="api-root"),
    path("health", HealthApi.as_view(), name="health"),
]
