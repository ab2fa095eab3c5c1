"""Helpers the whole suite shares (fixtures stay in conftest modules)."""

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from core.services import api_key_create


def make_user(username: str, *, staff: bool = False):
    return get_user_model().objects.create_user(
        username=username, password="test-password-1", is_staff=staff
    )


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=user).secret}")
    return client
