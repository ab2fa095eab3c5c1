"""Outside channels' configuration (issue 50, item 2): superusers configure, curators enable
one for their spaces, askers reach it only through a space that enables it; the credential
is stored encrypted and shown nowhere."""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from core.errors import NotFoundError, UnprocessableError
from knowledge.services import space_create, space_member_set
from outside.credentials import CredentialUnreadable, credential_open
from outside.models import Channel, ChannelKind, McpTransport, SpaceChannel
from outside.selectors import channel_enabled_for, channels_usable_by
from outside.services import channel_save, space_channel_disable, space_channel_enable
from tests.helpers import make_user

pytestmark = pytest.mark.django_db

SECRET = "sk-live-0123456789-do-not-leak"


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser(
        username="root", password="test-password-1", email=""
    )


def peer(root, **fields) -> Channel:
    values = {
        "name": "Legal koinon",
        "kind": ChannelKind.FEDERATED_RAG,
        "endpoint": "https://koinon.legal.example/",
        **fields,
    }
    return channel_save(user=root, channel=Channel(**values), credential=SECRET)


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_credential_is_stored_encrypted_and_opens_with_the_key(root):
    channel = peer(root)
    with connection.cursor() as cursor:
        cursor.execute("SELECT credential FROM outside_channel WHERE id = %s", [channel.pk])
        (stored,) = cursor.fetchone()
    assert SECRET.encode() not in bytes(stored)
    assert credential_open(Channel.objects.get(pk=channel.pk).credential) == SECRET
    assert SECRET not in repr(channel) and SECRET not in str(channel)


def test_a_credential_under_another_key_is_unreadable_not_an_error_page(root, settings):
    channel = peer(root)
    settings.KOINON_CREDENTIALS_KEY = "b3RoZXItY3JlZGVudGlhbHMta2V5LW9mLTMyLWJ5dGU="
    with pytest.raises(CredentialUnreadable) as caught:
        credential_open(channel.credential)
    assert SECRET not in str(caught.value)


def test_saving_without_a_credential_keeps_it_and_an_empty_one_removes_it(root):
    channel = peer(root)
    channel.max_results = 7
    channel_save(user=root, channel=channel)
    assert credential_open(Channel.objects.get(pk=channel.pk).credential) == SECRET
    channel_save(user=root, channel=channel, credential="")
    assert Channel.objects.get(pk=channel.pk).credential is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"endpoint": "ftp://koinon.legal.example/"}, "endpoint"),
        ({"endpoint": "https://user:pw@koinon.legal.example/"}, "endpoint"),
        ({"endpoint": "not a url"}, "endpoint"),
        ({"endpoint": ""}, "endpoint"),
        ({"kind": ChannelKind.FETCH_URL}, "endpoint"),
        ({"kind": ChannelKind.RETRIEVAL_ENDPOINT}, "options"),
        ({"kind": ChannelKind.RETRIEVAL_ENDPOINT, "options": ["store"]}, "options"),
        ({"transport": McpTransport.STDIO}, "transport"),
        ({"kind": "telepathy"}, "kind"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": 3600}, "timeout_seconds"),
        ({"max_results": 0}, "max_results"),
        ({"max_results": 500}, "max_results"),
        ({"max_bytes": 10}, "max_bytes"),
        ({"max_bytes": 10**10}, "max_bytes"),
        ({"name": ""}, "name"),
        (
            {"kind": ChannelKind.FETCH_URL, "endpoint": "", "options": {"urls": "http://a/"}},
            "options",
        ),
        (
            {"kind": ChannelKind.FETCH_URL, "endpoint": "", "options": {"urls": ["file:///x"]}},
            "options",
        ),
        ({"kind": ChannelKind.FETCH_URL, "endpoint": "", "options": {"urls": [7]}}, "options"),
        (
            {
                "kind": ChannelKind.FETCH_URL,
                "endpoint": "",
                "options": {"urls": ["http://a/"] * 51},
            },
            "options",
        ),
    ],
)
def test_a_bad_configuration_is_refused_naming_its_field_and_nothing_is_stored(root, fields, field):
    with pytest.raises(UnprocessableError) as caught:
        peer(root, **fields)
    assert caught.value.error_code == "invalid_channel"
    assert field in caught.value.fields
    assert not Channel.objects.exists()


def test_each_kind_accepts_its_own_shape(root):
    peer(root)
    peer(root, name="Wiki MCP", kind=ChannelKind.MCP_SEARCH, endpoint="http://10.0.0.5:8000/mcp")
    peer(
        root,
        name="Local MCP",
        kind=ChannelKind.MCP_SEARCH,
        transport=McpTransport.STDIO,
        endpoint="wiki-mcp --stdio",
    )
    peer(root, name="Pages", kind=ChannelKind.FETCH_URL, endpoint="")
    peer(root, name="Search", kind=ChannelKind.WEB_SEARCH, endpoint="http://searx.internal/")
    peer(
        root,
        name="Vectors",
        kind=ChannelKind.RETRIEVAL_ENDPOINT,
        endpoint="https://rag.internal/",
        options={"store_id": "vs_42"},
    )
    assert Channel.objects.count() == 6


def test_only_a_superuser_configures_a_channel(staff, owner):
    for user in (staff, owner):
        with pytest.raises(NotFoundError):
            channel_save(
                user=user, channel=Channel(name="x", kind="web_search", endpoint="http://a/")
            )
    assert not Channel.objects.exists()


def test_a_channel_reaches_an_asker_only_through_a_space_that_enables_it(
    root, space, owner, member, outsider
):
    channel = peer(root)
    assert not channels_usable_by(user=member).exists()
    space_channel_enable(user=owner, space=space, channel=channel)
    assert list(channels_usable_by(user=member)) == [channel]
    assert list(channels_usable_by(user=owner, space_ids=[space.pk])) == [channel]
    assert not channels_usable_by(user=member, space_ids=[space.pk + 1000]).exists()
    assert not channels_usable_by(user=outsider).exists()
    assert channel_enabled_for(channel_id=channel.pk, space_ids=[space.pk])
    # A superuser's switch takes it from everyone at once.
    channel.active = False
    channel_save(user=root, channel=channel)
    assert not channels_usable_by(user=member).exists()
    assert not channel_enabled_for(channel_id=channel.pk, space_ids=[space.pk])


def test_enabling_a_channel_grants_nothing_in_another_space(root, space, owner, outsider):
    channel = peer(root)
    other = space_create(name="Elsewhere", created_by=outsider)
    space_channel_enable(user=owner, space=space, channel=channel)
    assert not channels_usable_by(user=outsider).exists()
    assert not channel_enabled_for(channel_id=channel.pk, space_ids=[other.pk])


def test_only_a_curator_of_the_space_enables_or_disables_and_both_look_missing_otherwise(
    root, space, owner, member, outsider
):
    channel = peer(root)
    for user in (member, make_user("helpdesk", staff=True), outsider):
        with pytest.raises(NotFoundError) as caught:
            space_channel_enable(user=user, space=space, channel=channel)
        assert caught.value.error_code == "space_not_found"
    space_channel_enable(user=owner, space=space, channel=channel)
    space_channel_enable(user=owner, space=space, channel=channel)  # twice: still one
    assert SpaceChannel.objects.count() == 1
    with pytest.raises(NotFoundError):
        space_channel_disable(user=member, space=space, channel=channel)
    space_channel_disable(user=owner, space=space, channel=channel)
    assert not channel_enabled_for(channel_id=channel.pk, space_ids=[space.pk])
    with pytest.raises(NotFoundError):
        space_channel_disable(user=owner, space=space, channel=channel)


def test_an_inactive_channel_cannot_be_enabled(root, space, owner):
    channel = peer(root, active=False)
    with pytest.raises(NotFoundError) as caught:
        space_channel_enable(user=owner, space=space, channel=channel)
    assert caught.value.error_code == "channel_not_found"


def test_admin_configures_a_channel_with_a_write_only_credential(root):
    client = browser(root)
    response = client.post(
        "/admin/outside/channel/add/",
        {
            "name": "Search",
            "kind": "web_search",
            "endpoint": "http://searx.internal/",
            "transport": "http",
            "options": "{}",
            "timeout_seconds": "5",
            "max_results": "5",
            "max_bytes": "1048576",
            "active": "on",
            "new_credential": SECRET,
            "space_links-TOTAL_FORMS": "0",
            "space_links-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    channel = Channel.objects.get(name="Search")
    assert credential_open(channel.credential) == SECRET
    for url in ("/admin/outside/channel/", f"/admin/outside/channel/{channel.pk}/change/"):
        page = client.get(url)
        assert page.status_code == 200
        assert SECRET not in page.content.decode()


def test_admin_refuses_a_bad_endpoint_with_a_form_error(root):
    response = browser(root).post(
        "/admin/outside/channel/add/",
        {
            "name": "Search",
            "kind": "web_search",
            "endpoint": "file:///etc/passwd",
            "transport": "http",
            "options": "{}",
            "timeout_seconds": "5",
            "max_results": "5",
            "max_bytes": "1048576",
            "space_links-TOTAL_FORMS": "0",
            "space_links-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "http:// or https://" in response.content.decode()
    assert not Channel.objects.exists()


def test_channels_in_admin_are_for_superusers_only(root, staff, space, owner):
    peer(root)
    owner.is_staff = True
    owner.save()
    for user in (staff, owner):  # staff created the space: a curator too
        assert browser(user).get("/admin/outside/channel/").status_code == 403


def test_a_curator_enables_a_channel_in_admin_for_a_space_they_curate_only(root, space, owner):
    channel = peer(root)
    owner.is_staff = True
    owner.save()
    other = space_create(name="Elsewhere", created_by=make_user("someone"))
    client = browser(owner)
    refused = client.post(
        "/admin/outside/spacechannel/add/", {"space": other.pk, "channel": channel.pk}
    )
    assert refused.status_code == 200  # the form's choice error: not one of the choices
    assert not SpaceChannel.objects.exists()
    added = client.post(
        "/admin/outside/spacechannel/add/", {"space": space.pk, "channel": channel.pk}
    )
    assert added.status_code == 302
    link = SpaceChannel.objects.get()
    assert (link.space, link.channel, link.enabled_by) == (space, channel, owner)
    deleted = client.post(f"/admin/outside/spacechannel/{link.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert not SpaceChannel.objects.exists()


def test_a_staff_user_who_curates_nothing_sees_no_channel_links(root, space, owner):
    channel = peer(root)
    space_channel_enable(user=owner, space=space, channel=channel)
    helpdesk = make_user("helpdesk", staff=True)
    space_member_set(space=space, username=helpdesk.username, role="reader")
    assert browser(helpdesk).get("/admin/outside/spacechannel/").status_code == 403


def settings_start(tmp_path, **env: str) -> subprocess.CompletedProcess:
    """The production settings imported in a fresh interpreter (its own data directory)."""
    environment = {
        **{k: v for k, v in os.environ.items() if k != "KOINON_CREDENTIALS_KEY"},
        "KOINON_DATA_DIR": str(tmp_path),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", "import koinon.settings as s; print(s.KOINON_CREDENTIALS_KEY)"],
        capture_output=True,
        text=True,
        env=environment,
        cwd=settings.BASE_DIR,
        timeout=120,
    )


def test_a_credentials_key_that_is_not_a_fernet_key_stops_the_start(tmp_path):
    refused = settings_start(tmp_path, KOINON_CREDENTIALS_KEY="too-short")
    assert refused.returncode != 0
    assert "KOINON_CREDENTIALS_KEY must be 32 bytes" in refused.stderr
    assert "too-short" not in refused.stderr  # the value itself is never echoed


def test_without_a_credentials_key_one_is_made_once_in_the_data_directory(tmp_path):
    first = settings_start(tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    key_file = tmp_path / "credentials.key"
    assert first.stdout.strip() == key_file.read_text().strip()
    assert key_file.stat().st_mode & 0o777 == 0o600
    again = settings_start(tmp_path)
    assert again.stdout == first.stdout
