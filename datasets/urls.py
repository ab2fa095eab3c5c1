from django.urls import path

from datasets.apis import DatasetDetailApi, DatasetListCreateApi, DatasetQueryApi, DatasetSchemaApi

urlpatterns = [
    path("datasets", DatasetListCreateApi.as_view(), name="dataset-list"),
    path("datasets/<str:dataset_id>", DatasetDetailApi.as_view(), name="dataset-detail"),
    path("datasets/<str:dataset_id>/schema", DatasetSchemaApi.as_view(), name="dataset-schema"),
    path("datasets/<str:dataset_id>/query", DatasetQueryApi.as_view(), name="dataset-query"),
]
