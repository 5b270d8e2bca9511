"""No deprecation warning from our code: bundled plugins build SelectField choices with digits_core.select_choices."""

import subprocess
import sys
import warnings

from wtforms import Form, SelectField

from digits_core import select_choices


def test_select_choices_render_and_validate_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        form_class = type("F", (Form,), {"mode": SelectField("Mode", choices=select_choices([("a", "A"), "b"]))})
        form = form_class(data={"mode": "b"})
        assert form.validate() and form.mode.data == "b"
        assert '<option value="a">A</option>' in form.mode() and '<option selected value="b">b</option>' in form.mode()


def test_every_bundled_plugin_loads_when_deprecation_warnings_are_errors():
    code = ("from digits_core import registry\n"
            "print([(r.id, r.error) for r in registry.records() if r.status == 'failed'])\n")
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", result.stdout
