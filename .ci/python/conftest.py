"""Fixtures for the official Python client's live tests (queen-mq 2.6.0, `tests/`).

The published source distribution ships the tests without their conftest.py;
.ci/official-python.sh copies this one into the unpacked `tests/`.

- `client`: a `Queen(url)` client on the broker under test (the constructor is
  synchronous, `close()` is a coroutine), closed after the test.
- before every test, every queue the broker holds is deleted over HTTP
  (`GET /api/v1/resources/queues`, then `DELETE /api/v1/resources/queues/{name}`),
  so each test starts on an empty broker whatever the earlier ones left.

The broker is `QUEEN_URL` (or `QUEEN_SERVER_URL`; the script sets both).

When `JWT_SECRET` is set, the broker runs with `--jwt-secret` and the same secret:
only test_auth.py's tests run then (they sign their own tokens and gate themselves
on `JWT_SECRET`; every other test calls the broker without a token, so the rest
are deselected), and the cleanup carries an admin HS256 JWT signed with it.
"""

import base64
import hashlib
import hmac
import json
import os
import time
from urllib.parse import quote

import httpx
import pytest

from queen import Queen

URL = (
    os.environ.get("QUEEN_URL")
    or os.environ.get("QUEEN_SERVER_URL")
    or "http://localhost:6632"
).rstrip("/")
JWT_SECRET = os.environ.get("JWT_SECRET", "")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _admin_token() -> str:
    """An HS256 JWT with the admin role, valid for an hour."""
    now = int(time.time())
    claims = {"sub": "ci-cleanup", "role": "admin", "iat": now, "exp": now + 3600}
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(JWT_SECRET.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64url(sig)}"


def _auth_headers() -> dict:
    return {"Authorization": f"Bearer {_admin_token()}"} if JWT_SECRET else {}


def pytest_collection_modifyitems(config, items):
    """With `JWT_SECRET` set, keeps test_auth.py's tests only (see the module doc)."""
    if not JWT_SECRET:
        return
    dropped = [item for item in items if item.path.name != "test_auth.py"]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.path.name == "test_auth.py"]


@pytest.fixture(autouse=True)
def delete_every_queue():
    """Deletes every queue of the broker before each test."""
    with httpx.Client(base_url=URL, headers=_auth_headers(), timeout=30.0) as http:
        res = http.get("/api/v1/resources/queues")
        res.raise_for_status()
        for queue in res.json().get("queues") or []:
            name = queue["name"]
            gone = http.delete(f"/api/v1/resources/queues/{quote(name, safe='')}")
            if gone.status_code not in (200, 204, 404):
                gone.raise_for_status()
        left = http.get("/api/v1/resources/queues").json().get("queues") or []
        assert not left, f"queues left after the cleanup: {[q['name'] for q in left]}"
    yield


@pytest.fixture
async def client():
    """A Queen client on the broker under test, closed after the test."""
    queen = Queen(URL)
    try:
        yield queen
    finally:
        await queen.close()
