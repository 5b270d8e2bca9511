"""One path for plugin forms: Python values, command-line strings and browser form data."""

from __future__ import annotations

import argparse

import pytest
from werkzeug.datastructures import MultiDict
from wtforms import BooleanField, Form, IntegerField, SelectField, StringField, ValidationError, validators

from digits_core.errors import FormValidationError
from digits_core.forms import add_form_arguments, bind_form, form_values_from_namespace, validate_form, validate_values


class ResizeForm(Form):
    folder = StringField(
        "Training folder", validators=[validators.DataRequired()], description="One sub-folder per class"
    )
    width = IntegerField("Width", default=256, validators=[validators.NumberRange(min=1, max=4096)])
    resize_mode = SelectField("Resize mode", choices=[("squash", "Squash"), ("crop", "Crop")], default="squash")
    shuffle = BooleanField("Shuffle", default=True)
    encode = BooleanField("Encode", default=False)

    def validate_folder(self, field):
        if field.data == "missing":
            raise ValidationError("folder 'missing' does not exist")


def test_defaults_apply_to_fields_left_out():
    data = validate_values(ResizeForm, {"folder": "/data"})
    assert data == {"folder": "/data", "width": 256, "resize_mode": "squash", "shuffle": True, "encode": False}


def test_python_values_and_command_line_strings_give_the_same_data():
    from_python = validate_values(ResizeForm, {"folder": "/d", "width": 28, "shuffle": False, "encode": True})
    from_strings = validate_values(ResizeForm, {"folder": "/d", "width": "28", "shuffle": "false", "encode": "yes"})
    assert from_python == from_strings
    assert from_python["width"] == 28 and from_python["shuffle"] is False and from_python["encode"] is True


def test_browser_semantics_for_raw_form_data():
    form = bind_form(
        ResizeForm, formdata=MultiDict({"folder": "/d", "width": "32", "resize_mode": "crop"}), meta={"csrf": False}
    )
    data = validate_form(form)
    assert data["shuffle"] is False  # an unchecked box is absent from browser form data
    assert data["resize_mode"] == "crop"


@pytest.mark.parametrize(
    "values, field, fragment",
    [
        ({"folder": "/d", "width": "-3"}, "width", "between 1 and 4096"),
        ({"folder": "/d", "width": "wide"}, "width", "Not a valid integer"),
        ({"folder": "/d", "resize_mode": "stretch"}, "resize_mode", "Not a valid choice"),
        ({"folder": "missing"}, "folder", "does not exist"),
        ({}, "folder", "required"),
        ({"folder": "/d", "colour": "red"}, "colour", "unknown field"),
    ],
)
def test_errors_name_the_field(values, field, fragment):
    with pytest.raises(FormValidationError) as info:
        validate_values(ResizeForm, values, form_name='dataset form of plugin "x"')
    assert field in info.value.errors
    assert any(fragment in message for message in info.value.errors[field])
    assert f"  {field}: " in str(info.value) and 'dataset form of plugin "x"' in str(info.value)


def test_command_line_options_are_generated_from_the_form():
    parser = argparse.ArgumentParser(prog="x")
    names = add_form_arguments(parser, ResizeForm, title="plugin options")
    assert names == ["folder", "width", "resize_mode", "shuffle", "encode"]
    help_text = parser.format_help()
    assert "--folder FOLDER" in help_text and "Training folder. One sub-folder per class" in help_text
    assert "--resize-mode {squash,crop}" in help_text and "(default: 256)" in help_text
    assert "--shuffle, --no-shuffle" in help_text and "(default: on)" in help_text
    namespace = parser.parse_args(["--folder", "/d", "--no-shuffle", "--resize-mode", "crop"])
    given = form_values_from_namespace(namespace, names)
    assert given == {"folder": "/d", "shuffle": False, "resize_mode": "crop"}
    assert validate_values(ResizeForm, given)["width"] == 256
    with pytest.raises(SystemExit):
        parser.parse_args(["--resize-mode", "stretch"])
