"""``teamctl web`` refuses what it must: no token, a wrong token, state changes without the CSRF
header or from another origin; the token in the URL becomes a cookie and leaves the address."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest

from actors.web.auth import Access, exposure_warning
from tests.web.conftest import WebServer, teamctl

ROUTES = [
    ("GET", "/"),
    ("GET", "/api/state"),
    ("GET", "/api/events"),
    ("GET", "/api/transcripts/lead"),
    ("GET", "/api/tasks/task_1"),
    ("GET", "/api/jobs/job_1/output"),
    ("GET", "/static/app.js"),
    ("GET", "/nothing-here"),
    ("POST", "/api/messages"),
    ("POST", "/api/approvals/plan-x"),
]


def _lead_inbox(server: WebServer) -> list[object]:
    return list(json.loads(teamctl(server.repo, "inbox", "lead", "--json").stdout))


def test_every_route_answers_401_with_nothing_in_it_without_the_token(web: WebServer) -> None:
    teamctl(web.repo, "task", "add", "secret plan")
    # one character changed; "x" + token[1:] equalled the token whenever it began with "x"
    wrong = ("y" if web.token[0] == "x" else "x") + web.token[1:]
    assert wrong != web.token
    attempts = [
        {},
        {"headers": {"Authorization": f"Bearer {wrong}"}},
        {"headers": {"Authorization": web.token}},  # not Bearer
        {"headers": {"Cookie": f"teamctl_0={web.token}"}},  # another port's cookie
        {"headers": {"Cookie": f"{Access(web.token, '127.0.0.1', 1).cookie_name}=x"}},
        {"params": {"token": wrong}},
    ]
    with httpx.Client(base_url=web.base, timeout=30) as http:
        for method, path in ROUTES:
            for kw in attempts:
                response = http.request(method, path, **kw)  # type: ignore[arg-type]
                assert response.status_code == 401, (method, path, kw)
                assert response.content == b"", (method, path, kw)
                assert "set-cookie" not in response.headers
        # The token in the query of a POST is refused too (it would land in logs and history).
        response = http.post("/api/messages", params={"token": web.token}, json={})
        assert response.status_code == 401
    assert _lead_inbox(web) == []


def test_the_token_in_the_url_becomes_a_cookie_and_is_stripped(web: WebServer) -> None:
    with httpx.Client(base_url=web.base, timeout=30) as http:
        response = http.get(web.url)
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        kept = http.get("/api/state?token=" + web.token + "&x=1")
        assert kept.headers["location"] == "/api/state?x=1"
        page = http.get("/")  # the cookie now
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert http.get("/api/state").json()["tasks"] == []


@contextlib.contextmanager
def _cookie_client(server: WebServer) -> Iterator[httpx.Client]:
    """A client logged in as a browser is: through the tokened URL, then by its cookie only."""
    with httpx.Client(base_url=server.base, timeout=30) as http:
        assert http.get(server.url).status_code == 303
        assert http.cookies
        yield http


def test_state_changes_need_the_csrf_header_and_the_dashboards_origin(web: WebServer) -> None:
    csrf = web.csrf()
    body = {"to": "lead", "body": "hello"}
    with _cookie_client(web) as http:
        refusals = [
            {"Origin": web.base},  # no CSRF header
            {"Origin": web.base, "X-Teamctl-CSRF": "0" * len(csrf)},
            {"X-Teamctl-CSRF": csrf},  # a cookie without an Origin
            {"X-Teamctl-CSRF": csrf, "Origin": "http://evil.example"},
            {"X-Teamctl-CSRF": csrf, "Origin": web.base.replace("127.0.0.1", "127.0.0.1.nip.io")},
            {"X-Teamctl-CSRF": csrf, "Origin": "null"},
        ]
        for headers in refusals:
            response = http.post("/api/messages", json=body, headers=headers)
            assert response.status_code == 403, headers
            assert "error" in response.json()
        assert _lead_inbox(web) == []
        ok = http.post(
            "/api/messages", json=body, headers={"X-Teamctl-CSRF": csrf, "Origin": web.base}
        )
        assert ok.status_code == 200
        local = web.base.replace("127.0.0.1", "localhost")
        ok = http.post(
            "/api/messages", json=body, headers={"X-Teamctl-CSRF": csrf, "Origin": local}
        )
        assert ok.status_code == 200
    with web.client() as http:  # a script: Bearer, no Origin, the CSRF value still needed
        assert http.post("/api/messages", json=body).status_code == 403
        response = http.post("/api/messages", json=body, headers={"X-Teamctl-CSRF": csrf})
        assert response.status_code == 200
        evil = {"X-Teamctl-CSRF": csrf, "Origin": "http://evil.example"}
        assert http.post("/api/messages", json=body, headers=evil).status_code == 403
    assert len(_lead_inbox(web)) == 3


def test_a_new_server_has_a_new_token(team_repo, start_web) -> None:  # type: ignore[no-untyped-def]
    one, two = start_web(team_repo), start_web(team_repo)
    assert one.token != two.token and one.csrf() != two.csrf()
    with httpx.Client(base_url=two.base, timeout=30) as http:
        response = http.get("/api/state", headers={"Authorization": f"Bearer {one.token}"})
        assert response.status_code == 401


@pytest.mark.parametrize(
    ("host", "warns"),
    [
        ("127.0.0.1", False),
        ("localhost", False),
        ("::1", False),
        ("127.0.0.2", False),
        ("0.0.0.0", True),
        ("192.168.1.5", True),
        ("example.org", True),
    ],
)
def test_only_a_non_loopback_host_is_warned_about(host: str, warns: bool) -> None:
    assert (exposure_warning(host) is not None) == warns


def test_loopback_startup_prints_only_the_url(web: WebServer) -> None:
    assert web.url.startswith("http://127.0.0.1:") and "/?token=" in web.url
    assert web.stop() == 130
    assert "warning" not in web.stderr_text
    assert "Traceback" not in web.stderr_text, web.stderr_text


def test_outside_a_team_it_fails_in_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from tests.web.conftest import TEAMCTL, cli_env

    done = subprocess.run(
        [TEAMCTL, "web", "--no-open", "--port", "0"],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: ")


def test_the_page_and_its_assets_only_from_the_static_folder(web: WebServer) -> None:
    with web.client() as http:
        page = http.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        for bad in ("/static/..%2F__init__.py", "/static/..%2Fauth.py", "/static/%2e%2e/app.py"):
            response = http.get(bad)
            assert response.status_code == 404, bad
            assert "import" not in response.text
