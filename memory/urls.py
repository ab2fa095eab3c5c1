from django.urls import path

from memory.apis import MemoryDetailApi, MemoryListCreateApi, ProjectMemoryApi

urlpatterns = [
    path("memory", MemoryListCreateApi.as_view(), name="memory"),
    path("memory/<str:entry_id>", MemoryDetailApi.as_view(), name="memory-detail"),
    path("spaces/<str:space_id>/project-memory", ProjectMemoryApi.as_view(), name="project-memory"),
]
