from django.urls import path

from worldmodel.apis import WorldModelApi

urlpatterns = [path("world-model", WorldModelApi.as_view(), name="world-model")]
