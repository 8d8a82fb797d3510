"""Real browser, real OIDC provider (oidc-provider-mock on localhost): sign-in gates every page and job link, user B
cannot list, open or cancel user A's plan, and a share link opens one plan read-only until it is revoked."""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_browser import (
    ACTION_TIMEOUT_MS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PLAN_TIMEOUT_MS,
    RENDER_TIMEOUT_MS,
    _free_port,
    _record_timing,
    _settled,
    running_app,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """oidc-provider-mock on a free localhost port: any client id, any subject typed on its authorize form."""
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=_free_port()) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def team_server(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`streamlit run app.py` with sign-in configured by a secrets.toml of its own (``--secrets.files``)."""
    port = _free_port()
    url = f"http://localhost:{port}"
    folder = tmp_path_factory.mktemp("team")
    secrets_file = folder / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "{url}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\n'
        'client_id = "planning-workbench"\n'
        'client_secret = "not-checked-by-the-mock"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n')
    env = {**os.environ, "PLANNING_HOME": str(folder / "home")}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.address",
           "localhost", "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--secrets.files", str(secrets_file)]
    with running_app(cmd, env, folder / "streamlit.log", url) as running:
        yield running


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Headless Debian Chromium; each test user gets a context of their own (own cookies)."""
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing at /usr/bin/chromium. Install it with: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _visitor(chromium: Any) -> Any:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context.new_page()


def _only_sign_in(page: Any) -> None:
    page.get_by_role("heading", name="Sign in").wait_for(timeout=RENDER_TIMEOUT_MS)
    _settled(page)
    assert page.get_by_test_id("stSidebarNav").count() == 0
    assert page.get_by_test_id("stSelectbox").count() == 0 and page.get_by_test_id("stDataFrame").count() == 0


def _sign_in(page: Any, url: str, subject: str) -> None:
    """Through the provider's own authorize form, as a user would."""
    page.goto(url)
    _only_sign_in(page)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize").click()
    page.get_by_test_id("stSidebarNav").wait_for(timeout=RENDER_TIMEOUT_MS)
    # the page after the provider's redirect may show the sidebar with skeletons (and "notRunning") before its
    # first run: wait for the button, as a user would, then check there is one
    page.get_by_role("button", name="Sign out").wait_for(timeout=RENDER_TIMEOUT_MS)
    _settled(page)
    assert page.get_by_role("button", name="Sign out").count() == 1


def _plan(page: Any, url: str) -> str:
    page.goto(url)
    _settled(page)
    page.get_by_test_id("stSelectbox").first.click()
    page.keyboard.type("melange-arena")
    page.get_by_role("option", name="melange-arena", exact=True).click()
    _settled(page)
    page.get_by_role("button", name="Plan it").click()
    page.get_by_test_id("stMetric").filter(has_text="Cost per hour").wait_for(timeout=PLAN_TIMEOUT_MS)
    _settled(page)
    return str(page.url.split("job=")[1].split("&")[0])


def _make_share_link(page: Any, attempts: int = 3) -> str:
    """Press "Make a share link" until the link is on screen: on a busy server (CI, with a solve beside it) a press
    that reaches the page while it reruns can be lost, and the page then shows no link (the test waited 300 s for
    one); it is pressed again, at most ``attempts`` times. How many presses it took is recorded
    (``team.share_link_presses``): a lost press costs a whole ``RENDER_TIMEOUT_MS`` of the test's time."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(attempts):
        page.get_by_role("button", name="Make a share link").click()
        _settled(page)
        try:
            page.get_by_test_id("stCode").first.wait_for(timeout=RENDER_TIMEOUT_MS)
            break
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
    _record_timing("team.share_link_presses", attempt + 1)
    return str(page.get_by_test_id("stCode").first.inner_text()).strip()


def test_sign_in_privacy_and_share_links(team_server: str, chromium: Any) -> None:
    url = team_server
    stranger = _visitor(chromium)
    start = time.monotonic()  # each step's seconds are recorded: where a slow run's time went
    for path in ("/", "/Jobs", "/Plan?job=0123456789abcdef"):  # every page and every job link
        stranger.goto(url + path)
        _only_sign_in(stranger)
    _record_timing("team.sign_in_pages_s", time.monotonic() - start)

    ada = _visitor(chromium)
    start = time.monotonic()
    _sign_in(ada, url, "ada")
    _record_timing("team.sign_in_s", time.monotonic() - start)
    start = time.monotonic()
    job_id = _plan(ada, url)
    _record_timing("team.plan_s", time.monotonic() - start)

    bob = _visitor(chromium)
    _sign_in(bob, url, "bob")
    bob.goto(f"{url}/Jobs")
    bob.get_by_text("No jobs yet.").wait_for(timeout=RENDER_TIMEOUT_MS)
    for guess in (job_id, "ffffffffffffffff"):  # ada's real id and a made-up one answer alike
        bob.goto(f"{url}/Plan?job={guess}")
        bob.get_by_text("No plan yet").wait_for(timeout=RENDER_TIMEOUT_MS)
        _settled(bob)
        assert bob.get_by_role("button", name="Report (Markdown)").count() == 0
    stranger.goto(f"{url}/Plan?job={job_id}")
    _only_sign_in(stranger)

    ada.goto(f"{url}/Jobs")
    _settled(ada)
    ada.get_by_text("Share a plan read-only").click()
    link = _make_share_link(ada)
    assert "?share=" in link

    stranger.goto(link)  # finance, without an account
    stranger.get_by_role("heading", name="Shared plan: ").first.wait_for(timeout=RENDER_TIMEOUT_MS)
    _settled(stranger)
    assert stranger.get_by_test_id("stSidebarNav").count() == 0
    # the report button renders after the heading, sometimes in a later run than the one _settled saw end: wait
    # for it (it failed once by counting at once), then check it is there exactly once
    stranger.get_by_role("button", name="Report (Markdown)").wait_for(timeout=RENDER_TIMEOUT_MS)
    assert stranger.get_by_role("button", name="Report (Markdown)").count() == 1

    ada.get_by_role("button", name="Revoke").click()
    _settled(ada)
    stranger.goto(link)
    stranger.get_by_text("this share link was revoked").wait_for(timeout=RENDER_TIMEOUT_MS)
    assert stranger.get_by_role("button", name="Report (Markdown)").count() == 0
