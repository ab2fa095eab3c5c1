from django.urls import path

from outside.apis import SnapshotListApi

urlpatterns = [
    path("snapshots", SnapshotListApi.as_view(), name="snapshot-list"),
]
