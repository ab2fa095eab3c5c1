"""Helpers for chat tests against the suite's live Daphne: a signed-in httpx client."""

import re

import httpx


def signed_in(url: str, username: str, password: str) -> httpx.Client:
    """A client holding a session cookie, signed in through the login form (with CSRF)."""
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/login/", data={"username": username, "password": password, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302 and response.headers["location"] == "/"
    return client
