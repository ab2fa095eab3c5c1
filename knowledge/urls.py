from django.urls import path

from knowledge.apis import SpaceDetailApi, SpaceListCreateApi, SpaceMemberDetailApi, SpaceMembersApi
from knowledge.curation_apis import ProposalDetailApi, ProposalListCreateApi
from knowledge.document_apis import (
    DocumentDetailApi,
    DocumentListCreateApi,
    DocumentRestoreApi,
    DocumentTextApi,
    DocumentWithdrawApi,
    RevisionEraseApi,
    SearchApi,
)

urlpatterns = [
    path("knowledge/proposals", ProposalListCreateApi.as_view(), name="proposal-list"),
    path(
        "knowledge/proposals/<str:proposal_id>", ProposalDetailApi.as_view(), name="proposal-detail"
    ),
    path("search", SearchApi.as_view(), name="search"),
    path("documents", DocumentListCreateApi.as_view(), name="document-list"),
    path("documents/<str:document_id>", DocumentDetailApi.as_view(), name="document-detail"),
    path("documents/<str:document_id>/text", DocumentTextApi.as_view(), name="document-text"),
    path(
        "documents/<str:document_id>/withdraw",
        DocumentWithdrawApi.as_view(),
        name="document-withdraw",
    ),
    path(
        "documents/<str:document_id>/restore", DocumentRestoreApi.as_view(), name="document-restore"
    ),
    path(
        "documents/<str:document_id>/revisions/<str:revision_id>/erase",
        RevisionEraseApi.as_view(),
        name="revision-erase",
    ),
    path("spaces", SpaceListCreateApi.as_view(), name="space-list"),
    path("spaces/<str:space_id>", SpaceDetailApi.as_view(), name="space-detail"),
    path("spaces/<str:space_id>/members", SpaceMembersApi.as_view(), name="space-members"),
    path(
        "spaces/<str:space_id>/members/<str:username>",
        SpaceMemberDetailApi.as_view(),
        name="space-member-detail",
    ),
]
