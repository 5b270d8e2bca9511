"""A page that reloads itself for fresh progress never cancels the navigation the user started.

The home page reloads every 5 s while a job waits or runs. A click (or an address typed) that is still
loading when that timer fires used to be cancelled by the reload: the user stayed where they were, and a
CI run saw Playwright's ``page.goto`` fail with "interrupted by another navigation". The page now marks
itself as being left on ``beforeunload`` and its reloads stand down (``DIGITS.reloadPage`` in digits.js).

A real ``digits serve`` (127.0.0.1) and headless Chromium; the next page is held back 7 s in the browser
(Playwright's request routing) so the home page's 5 s reload falls inside the navigation every time.
"""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_the_home_pages_reload_never_cancels_a_navigation_under_way(live_server, chromium):
    from digits_core.jobs import Job, JobStatus

    server = live_server()
    url = server.url
    job = Job.create("model", "queued run", jobs_dir=server.jobs_dir)
    job.set_status(JobStatus.WAITING)  # not handed to the scheduler: it stays Waiting, so the home page polls

    context = chromium.new_context()
    page = context.new_page()
    page.set_default_timeout(120_000)  # only the bound after which a wait on page state fails
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url + "/")
    assert page.locator("#home-jobs").get_attribute("data-active") == "true"  # the 5 s reload is armed

    def held_back(route):
        time.sleep(7)  # past the home page's 5 s reload, which fires while this navigation is pending
        route.continue_()

    page.route("**/models/new*", held_back)
    page.goto(url + "/models/new")  # raised "interrupted by another navigation" before the guard
    assert page.url == url + "/models/new"
    assert page.locator("form").count() > 0
    context.close()
    assert not errors, errors
