from django.urls import path

from audit.apis import LogCheckpointApi, LogConsistencyApi

urlpatterns = [
    path("log/checkpoint", LogCheckpointApi.as_view(), name="log-checkpoint"),
    path("log/consistency", LogConsistencyApi.as_view(), name="log-consistency"),
]
