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
    code = (
        "from digits_core import registry\n"
        "print([(r.id, r.error) for r in registry.records() if r.status == 'failed'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", result.stdout


def test_tuple_choices_of_a_digits6_style_form_bind_through_the_core_helpers_without_warnings():
    """``SelectField(choices=[(value, label)])`` declared on a plugin's form class: the core helpers turn the tuples
    into SelectChoice before WTForms sees them (WTForms 3.3 warns, 3.4 refuses); the web form's own fields too."""
    import argparse

    from digits_core.datasets.options import web_form_fields
    from digits_core.forms import add_form_arguments, bind_form, validate_form
    from digits_core.web.model_form import ModelForm

    form_class = type(
        "Digits6Form",
        (Form,),
        {
            "mode": SelectField(
                "Mode", choices=[("squash", "Squash"), ("crop", "Crop", {"class": "c"})], default="crop"
            ),
            "size": SelectField("Size", choices=["small", "large"]),
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        form = bind_form(form_class, {"mode": "squash", "size": "large"}, meta={"csrf": False})
        assert validate_form(form) == {"mode": "squash", "size": "large"}
        assert '<option class="c" value="crop">Crop</option>' in form.mode()
        value, label = form.mode.choices[0]  # the plugin's own code still reads the tuples it declared
        assert (value, label) == ("squash", "Squash") == form.mode.choices[0] and form.mode.choices[1][2] == {
            "class": "c"
        }
        parser = argparse.ArgumentParser()
        add_form_arguments(parser, form_class)
        assert parser.parse_args(["--mode", "crop"]).mode == "crop"
        bind_form(form_class, {"mode": "crop"}, meta={"csrf": False})  # a second time: still SelectChoices
        model_form = ModelForm()  # generated option fields: choices, switches, the Search panel's scheduler
        assert "<option" in model_form.solver() and "<option" in model_form.shuffle()
        dataset_fields = type("DatasetJob", (Form,), web_form_fields())()
        assert 'name="job_workers"' in dataset_fields.job_workers()
