"""axe-core accessibility checks for the browser tests (issue 43).

``axe_violations(page)`` injects ``axe.min.js`` (npm ``axe-core``, installed into
``tests/a11y/node_modules`` by ``scripts/ensure-axe.sh`` on first use) into the page the
browser shows and returns the serious and critical violations, each as one line naming the
rule and the elements. Without npm the test is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
#: The impacts that fail a page (axe-core's "minor" and "moderate" are reported, not failed).
FAILING = ("serious", "critical")


@functools.cache
def axe_source() -> str:
    """The text of ``axe.min.js``, installed first when missing (skips without npm, fails under CI)."""
    if not AXE.is_file():
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "ensure-axe.sh")], capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0 or not AXE.is_file():
            message = f"axe-core could not be installed (scripts/ensure-axe.sh): {done.stderr.strip()[-400:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
    return AXE.read_text(encoding="utf-8")


def axe_violations(page, what: str) -> list[str]:
    """The serious and critical axe-core violations of the page ``page`` shows, one line each.

    Args:
        page: A Playwright page, loaded.
        what: The page's name in the lines (``"home"``, ``"model"``).
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # evaluated through the DevTools protocol: the page's CSP (no inline scripts) stays as it is
        page.evaluate("source => (0, eval)(source)", axe_source())
    found = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
             .map(v => ({id: v.id, impact: v.impact,
                         nodes: v.nodes.slice(0, 4).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '')
                           .replace(/\\s+/g, ' ').slice(0, 160))}))"""
    )
    return [f"{what}: {v['impact']} {v['id']}: {v['nodes']}" for v in found if v["impact"] in FAILING]
