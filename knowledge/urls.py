from django.urls import path

from knowledge.apis import SpaceDetailApi, SpaceListCreateApi, SpaceMemberDetailApi, SpaceMembersApi

urlpatterns = [
    path("spaces", SpaceListCreateApi.as_view(), name="space-list"),
    path("spaces/<str:space_id>", SpaceDetailApi.as_view(), name="space-detail"),
    path("spaces/<str:space_id>/members", SpaceMembersApi.as_view(), name="space-members"),
    path(
        "spaces/<str:space_id>/members/<str:username>",
        SpaceMemberDetailApi.as_view(),
        name="space-member-detail",
    ),
]
