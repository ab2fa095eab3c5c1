from django.urls import path

from conversations.apis import (
    ConversationDetailApi,
    ConversationExportApi,
    ConversationListCreateApi,
    IntentCreateApi,
    IntentDetailApi,
    IntentProposalApi,
    ShareDeleteApi,
    ShareListCreateApi,
)

urlpatterns = [
    path("conversations", ConversationListCreateApi.as_view(), name="conversations"),
    path(
        "conversations/<str:conversation_id>",
        ConversationDetailApi.as_view(),
        name="conversation-detail",
    ),
    path(
        "conversations/<str:conversation_id>/export",
        ConversationExportApi.as_view(),
        name="conversation-export",
    ),
    path(
        "conversations/<str:conversation_id>/shares",
        ShareListCreateApi.as_view(),
        name="conversation-shares",
    ),
    path(
        "conversations/<str:conversation_id>/shares/<str:username>",
        ShareDeleteApi.as_view(),
        name="conversation-share",
    ),
    path(
        "conversations/<str:conversation_id>/intents",
        IntentCreateApi.as_view(),
        name="conversation-intents",
    ),
    path("intents/<str:intent_id>", IntentDetailApi.as_view(), name="intent-detail"),
    path("intents/<str:intent_id>/proposal", IntentProposalApi.as_view(), name="intent-proposal"),
]
