from django.urls import path

from answers.apis import AnswerApi, RunDetailApi

urlpatterns = [
    path("answer", AnswerApi.as_view(), name="answer"),
    path("runs/<str:run_id>", RunDetailApi.as_view(), name="run-detail"),
]
