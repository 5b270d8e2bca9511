"""``digits infer --help`` lists each inference-form option under the plugins whose form has it."""

from __future__ import annotations

import re

import pytest

from digits_core import registry
from digits_core.cli import main as digits
from digits_core.forms import option_name, user_fields
from digits_core.plugins.contract import inference_form


def _groups(capsys) -> dict[tuple, set]:
    with pytest.raises(SystemExit):
        digits(["infer", "--help"])
    text = capsys.readouterr().out
    groups, current = {}, None
    for line in text.splitlines():
        heading = re.match(r"^inference inputs of data plugins? (.*):$", line)
        if heading:
            current = tuple(re.findall(r'"([^"]+)"', heading.group(1)))
            groups[current] = set()
        elif current and re.match(r"^  --", line):
            groups[current].add(line.split()[0].split(",")[0])
        elif line and not line.startswith(" "):
            current = None
    return groups


def test_every_option_sits_under_exactly_the_plugins_that_have_it(capsys):
    groups = _groups(capsys)
    owners: dict[str, set] = {}
    for plugin_id, plugin in registry.data_ingestions().items():
        form = inference_form(plugin)
        for field in user_fields(form(meta={"csrf": False})) if form is not None else ():
            owners.setdefault(option_name(field.name), set()).add(plugin_id)
    listed = {option: set(plugins) for plugins, options in groups.items() for option in options}
    assert listed == owners
    shared = next(plugins for plugins, options in groups.items() if "--image-path" in options)
    assert {"image-classification", "image-segmentation"} <= set(shared)
    assert next(p for p, o in groups.items() if "--dicom-file" in o) == ("image-sunnybrook",)
