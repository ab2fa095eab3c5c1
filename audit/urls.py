from django.urls import path

from audit.apis import LogCheckpointApi, LogConsistencyApi, LogKeyApi

urlpatterns = [
    path("log/checkpoint", LogCheckpointApi.as_view(), name="log-checkpoint"),
    path("log/consistency", LogConsistencyApi.as_view(), name="log-consistency"),
    path("log/key", LogKeyApi.as_view(), name="log-key"),
]
