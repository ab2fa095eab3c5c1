from django.contrib.auth import views as auth_views
from django.urls import path

from chat import administration, library, question_sets, views
from core.throttle import ThrottledAuthenticationForm

app_name = "chat"

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="chat/login.html",
            redirect_authenticated_user=True,
            authentication_form=ThrottledAuthenticationForm,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("c/<int:conversation_id>/", views.conversation, name="conversation"),
    path("c/<int:conversation_id>/rename/", views.conversation_rename_view, name="rename"),
    path("c/<int:conversation_id>/delete/", views.conversation_delete_view, name="delete"),
    path("runs/<str:run_id>/answer/", views.answer_fragment, name="answer"),
    path("runs/<str:run_id>/receipt/<int:generation>/", views.receipt, name="receipt"),
    path("runs/<str:run_id>/regenerate/", views.regenerate, name="regenerate"),
    path("runs/<str:run_id>/sources/<int:generation>/<int:number>/", views.source, name="source"),
    path(
        "runs/<str:run_id>/sources/<int:generation>/<int:number>/page.png",
        views.source_page,
        name="source-page",
    ),
    path("runs/<str:run_id>/remember/", views.remember, name="remember"),
    path("memory/", views.memory, name="memory"),
    path("memory/<int:entry_id>/revoke/", views.memory_revoke_view, name="memory-revoke"),
    path("files/", views.file_upload, name="file-upload"),
    path("files/<int:document_id>/status/", views.file_status, name="file-status"),
    path("spaces/", library.spaces, name="spaces"),
    path("spaces/new/", administration.space_new, name="space-new"),
    path(
        "spaces/<int:space_id>/members/",
        administration.space_members_view,
        name="space-members",
    ),
    path(
        "spaces/<int:space_id>/members/remove/",
        administration.space_member_remove_view,
        name="space-member-remove",
    ),
    path("users/", administration.users, name="users"),
    path("users/<int:user_id>/active/", administration.user_active, name="user-active"),
    path("users/<int:user_id>/password/", administration.user_password, name="user-password"),
    path("keys/", administration.api_keys, name="api-keys"),
    path("keys/<int:api_key_id>/revoke/", administration.api_key_revoke, name="api-key-revoke"),
    path("spaces/<int:space_id>/", library.space, name="space"),
    path("spaces/<int:space_id>/documents/", library.space_upload, name="space-upload"),
    path(
        "spaces/<int:space_id>/documents/<int:document_id>/withdraw/",
        library.document_withdraw_view,
        name="document-withdraw",
    ),
    path(
        "spaces/<int:space_id>/documents/<int:document_id>/restore/",
        library.document_restore_view,
        name="document-restore",
    ),
    path(
        "spaces/<int:space_id>/documents/<int:document_id>/erase/",
        library.document_erase_view,
        name="document-erase",
    ),
    path("documents/<int:document_id>/status/", library.document_status, name="document-status"),
    path(
        "spaces/<int:space_id>/questions/",
        question_sets.question_sets,
        name="question-sets",
    ),
    path(
        "spaces/<int:space_id>/questions/<int:set_id>/",
        question_sets.question_set,
        name="question-set",
    ),
    path(
        "spaces/<int:space_id>/questions/<int:set_id>/run/",
        question_sets.question_set_run,
        name="question-set-run",
    ),
    path(
        "spaces/<int:space_id>/operating-point/",
        question_sets.space_operating_point,
        name="space-operating-point",
    ),
]
