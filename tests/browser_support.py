"""Headless Debian Chromium (Playwright) for the browser tests.

The ``chromium`` fixture (registered in ``tests/conftest.py``) launches one
browser per test module; tests open their own contexts and pages on it::

    @pytest.mark.slow
    @pytest.mark.browser
    def test_page(chromium):
        page = chromium.new_context().new_page()

Without ``/usr/bin/chromium`` the tests are skipped, except under CI, where
they fail (``scripts/ensure-chromium.sh`` installs it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Screenshots of the browser tests (git-ignored).
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the test module (Playwright ``Browser``); closed after its last test."""
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} missing: run scripts/ensure-chromium.sh"
        if os.environ.get("CI"):  # CI must run the browser tests, never skip them
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def assert_fits_a_phone(page, what: str, width: int = 375, screenshot: str | None = None) -> None:
    """At ``width`` px the page is no wider than the screen; then the page gets its viewport back.

    Args:
        page: A Playwright page showing the page to check.
        what: The page, as the failure message names it.
        width: The phone's width in CSS pixels.
        screenshot: A name: the page at that width is saved as ``test-artifacts/NAME.png``.

    On failure the message names the elements that reach past the screen's right edge.
    """
    viewport = page.viewport_size
    page.set_viewport_size({"width": width, "height": 800})
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    if screenshot:
        page.screenshot(path=str(ARTIFACTS / f"{screenshot}.png"), full_page=True)
    wide = (
        []
        if scroll <= width
        else page.evaluate(
            """w => [...document.querySelectorAll('body *')]
        .filter(e => Math.max(e.getBoundingClientRect().right, e.getBoundingClientRect().left + e.scrollWidth) > w + 0.5)
        .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined
             ? '.' + String(e.className).trim().split(/\\s+/).join('.') : '')
             + ' ' + Math.round(e.getBoundingClientRect().right)).slice(0, 12)""",
            width,
        )
    )
    if viewport:
        page.set_viewport_size(viewport)
    assert scroll <= width, f"{what} is {scroll} px wide at {width} px: {wide}"
