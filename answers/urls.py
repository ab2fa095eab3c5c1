from django.urls import path

from answers.apis import (
    AnswerApi,
    ReleaseProofApi,
    RunAuditApi,
    RunDetailApi,
    RunEventsApi,
    RunRetryApi,
)

urlpatterns = [
    path("answer", AnswerApi.as_view(), name="answer"),
    path("runs/<str:run_id>", RunDetailApi.as_view(), name="run-detail"),
    path("runs/<str:run_id>/retry", RunRetryApi.as_view(), name="run-retry"),
    path("runs/<str:run_id>/audit", RunAuditApi.as_view(), name="run-audit"),
    path("runs/<str:run_id>/events", RunEventsApi.as_view(), name="run-events"),
    path("releases/<str:release_id>/proof", ReleaseProofApi.as_view(), name="release-proof"),
]
