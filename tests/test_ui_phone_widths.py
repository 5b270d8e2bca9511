"""The home page at 375 px (issue 43, item 7): the dataset types of an empty home page and the New dataset
menu stay on the screen. A real ``digits serve`` in headless Chromium."""

from __future__ import annotations

import pytest

INSIDE = """sel => [...document.querySelectorAll(sel)].filter(e => e.getClientRects().length)
  .map(e => { const r = e.getBoundingClientRect(), clip = e.closest('.table-scroll, .panel').getBoundingClientRect();
              return {text: e.textContent.trim().slice(0, 40), left: r.left, right: r.right, clipRight: clip.right}; })
  .filter(b => b.left < 0 || b.right > Math.min(window.innerWidth, b.clipRight) + 0.5)"""


@pytest.mark.slow
@pytest.mark.browser
def test_home_dataset_types_and_menu_fit_a_phone(chromium, live_server):
    from browser_support import assert_fits_a_phone

    server = live_server()
    page = chromium.new_context(viewport={"width": 375, "height": 800}).new_page()
    page.goto(server.url + "/")
    assert_fits_a_phone(page, "home", screenshot="home-375")
    assert page.locator("tr.empty a").count() >= 3
    assert page.evaluate(INSIDE, "tr.empty a") == []  # every dataset type readable, none under the table's edge
    page.click(".panel-head details.dropdown summary")
    assert page.evaluate(INSIDE, ".panel-head .dropdown-menu") == []
    assert_fits_a_phone(page, "home with the New dataset menu open", screenshot="home-375-menu")
