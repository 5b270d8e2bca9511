"""Tests of the results-page renderer (digits_core.inference.report), without TensorFlow."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pytest

from digits_core import View, registry
from digits_core.errors import PluginError
from digits_core.inference import render_fragments, render_html, report_json, run_view


class EchoView(View):
    """A third-party-style view: shows the argmax and ships its own CSS and JS."""

    plugin_id = "image-classification"
    title = "Echo"
    stylesheets = ("echo.css",)
    scripts = ("echo.js",)
    static_folder = None

    def process_data(self, input_id, input_data, output_data, ground_truth=None):
        return {"id": input_id, "best": int(np.argmax(output_data)), "truth": ground_truth}

    def get_view_template(self, data):
        return '<p class="echo" data-id="{{ id }}">{{ id }} -> {{ best }}</p>', data

    def get_header_template(self):
        return "<h2>Echo header</h2>", {}

    def get_summary_template(self):
        return "<p class='echo-summary'>{{ n }} samples</p>", {"n": 2}

    @classmethod
    def get_static_folder(cls):
        return cls.static_folder


@pytest.fixture
def echo_view(tmp_path):
    (tmp_path / "echo.css").write_text(".echo { color: red; } /* </style> */")
    (tmp_path / "echo.js").write_text("window.echoLoaded = true;")
    EchoView.static_folder = tmp_path
    return EchoView


def test_page_is_self_contained_escaped_and_ordered(echo_view):
    view = echo_view(None)
    processed = run_view(view, [("<b>a</b>", None, np.array([0.1, 0.9]), 1), ("b", None, np.array([0.7, 0.3]), None)])
    page = render_html(view, processed, title="Results", info={"model": "<m>"})

    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Parser().feed(page)
    assert [a["data-id"] for t, a in found if t == "p" and "data-id" in a] == ["<b>a</b>", "b"]
    assert "<b>a</b>" not in page and "&lt;m&gt;" in page
    assert page.index("Echo header") < page.index("data-id=") < page.index("2 samples")
    assert ".echo { color: red; }" in page and "<\\/style>" in page and "window.echoLoaded" in page
    assert not [a for t, a in found if ("src" in a or "href" in a)]


def test_fragments_and_json(echo_view):
    view = echo_view(None)
    processed = run_view(view, [("x", None, np.array([0.2, 0.8]), np.int64(1))])
    fragments = render_fragments(view, processed)
    assert fragments["header"] == "<h2>Echo header</h2>" and len(fragments["samples"]) == 1
    data = report_json(view, processed)
    assert json.loads(json.dumps(data)) == {
        "view": "image-classification",
        "samples": [{"input_id": "x", "data": {"id": "x", "best": 1, "truth": 1}}],
        "header": {},
        "summary": {"n": 2},
    }


def test_broken_view_is_named(echo_view):
    class Broken(echo_view):
        def process_data(self, *args, **kwargs):
            raise RuntimeError("boom")

    with pytest.raises(PluginError, match='failed on input "x".*boom'):
        run_view(Broken(None), [("x", None, np.zeros(2), None)])


def test_third_party_view_replaces_builtin_in_process(echo_view):
    builtin = registry.get_view("image-classification")
    registry.register(echo_view, replace=True)
    try:
        assert registry.get_view("image-classification") is echo_view
    finally:
        registry.unregister(echo_view)
    assert registry.get_view("image-classification") is builtin


def test_cli_and_renderer_stay_free_of_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, digits_core; from digits_core.cli import build_parser; build_parser(); "
        "from digits_core import render_html, png_data_uri, to_display_uint8; "
        "import digits_core.inference.inputs, digits_core.inference.imageio, digits_core.inference.metrics; "
        "import digits_view_classification, digits_view_segmentation; "
        "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
