"""The MCP audit in Django admin: read-only, superusers only (it spans every user)."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from mcp_server.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def call(member) -> ToolCall:
    return ToolCall.objects.create(
        user=member,
        key_prefix="kn_abcdefgh",
        transport="http",
        tool="search",
        arguments={"query": "q"},
        result_count=2,
    )


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_superuser_reads_tool_calls_and_cannot_change_them(call):
    root = get_user_model().objects.create_superuser("root", password="test-password-1")
    client = browser(root)
    listing = client.get("/admin/mcp_server/toolcall/")
    assert listing.status_code == 200 and "kn_abcdefgh" in listing.content.decode()
    assert client.get("/admin/mcp_server/toolcall/add/").status_code == 403
    detail = client.post(f"/admin/mcp_server/toolcall/{call.pk}/change/", {"tool": "answer"})
    assert detail.status_code == 403 or ToolCall.objects.get().tool == "search"
    assert client.post(f"/admin/mcp_server/toolcall/{call.pk}/delete/", {"post": "yes"})
    assert ToolCall.objects.filter(pk=call.pk).exists()


def test_staff_with_the_view_permission_still_see_no_tool_calls(call, staff):
    staff.user_permissions.add(Permission.objects.get(codename="view_toolcall"))
    assert browser(staff).get("/admin/mcp_server/toolcall/").status_code == 403
