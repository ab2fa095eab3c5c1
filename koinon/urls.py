from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.errors import json_not_found, json_server_error

v1 = [
    path("", include("core.urls")),
    path("", include("knowledge.urls")),
    path("", include("datasets.urls")),
    path("", include("answers.urls")),
    path("", include("worldmodel.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("schema/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="schema-docs"),
]

urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
    path("v1/", include(v1)),
]

handler404 = json_not_found
handler500 = json_server_error
