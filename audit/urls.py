from django.urls import path

from audit.apis import LogCheckpointApi

urlpatterns = [
    path("log/checkpoint", LogCheckpointApi.as_view(), name="log-checkpoint"),
]
