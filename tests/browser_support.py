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
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
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
