from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from core.errors import json_not_found, json_server_error
from core.throttle import ThrottledAdminAuthenticationForm

v1: list[URLPattern | URLResolver] = [
    path("", include("core.urls")),
    path("", include("knowledge.urls")),
    path("", include("datasets.urls")),
    path("", include("answers.urls")),
    path("", include("audit.urls")),
    path("", include("conversations.urls")),
    path("", include("memory.urls")),
    path("", include("worldmodel.urls")),
    path("", include("outside.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI's script comes from a URL of its own (no inline script); it styles itself
    # inline, which the site-wide policy does not allow.
    path(
        "schema/docs/",
        csp_override({**settings.SECURE_CSP, "style-src": [CSP.SELF, CSP.UNSAFE_INLINE]})(
            SpectacularSwaggerSplitView.as_view(url_name="schema")
        ),
        name="schema-docs",
    ),
]

admin.site.login_form = ThrottledAdminAuthenticationForm  # wrong passwords are throttled

urlpatterns = [
    path("", include("chat.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("v1/", include(v1)),
]

handler404 = json_not_found
handler500 = json_server_error
