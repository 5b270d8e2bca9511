"""The New Model form with the backbones plugin, in headless Chromium on a real ``digits serve`` (issue 41).

A dataset of 16×16 images: the backbones (minimum 32×32) are offered disabled, the reason in their label
and under the menu, until the network parameter ``input_size`` resizes in the graph; the weights picker
lists none, the network's declared weights and the zoo entries made for that network (not another's);
the chosen entry is what Create sends (the server checks its hash and names it).
"""

from __future__ import annotations

import json

import pytest

from digits_core.jobs import Job, JobStatus


def _dataset(jobs, name, size):
    ds = Job.create(
        "dataset", name, jobs_dir=jobs, plugin_id="image-classification", dataset={"label": {"kind": "class"}}
    )
    ds.set_status(JobStatus.DONE)
    (ds.path / "dataset").mkdir()
    feature = {"shape": [size, size, 3], "dtype": "uint8", "layout": "HWC"}
    (ds.path / "dataset" / "dataset.json").write_text(json.dumps({"feature": feature, "label": {"kind": "class"}}))
    return ds


@pytest.mark.slow
@pytest.mark.browser
def test_form_disables_small_backbones_and_picks_zoo_weights(tmp_path, live_server, chromium):
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "cells.weights.h5").write_bytes(b"not the hashed file")
    entries = {
        "cells-v1": {
            "file": "cells.weights.h5",
            "sha256": "0" * 64,
            "network": "mobilenet_v3_small",
            "task": "classification",
        },
        "other-net": {"file": "cells.weights.h5", "sha256": "0" * 64, "network": "resnet50_v2"},
    }
    (zoo / "manifest.json").write_text(json.dumps({"entries": entries}))
    jobs = tmp_path / "jobs"
    small, large = _dataset(jobs, "small", 16), _dataset(jobs, "large", 64)
    server = live_server(jobs, env={"DIGITS_ZOO": str(zoo), "DIGITS_OFFLINE": "1"})
    page = chromium.new_context().new_page()
    try:
        page.goto(server.url + f"/models/new?dataset={small.id}")
        page.select_option("[name=dataset]", small.id)
        option = page.locator("[name=network] option[value=mobilenet_v3_small]")
        page.wait_for_function(
            "() => document.querySelector('[name=network] option[value=mobilenet_v3_small]').disabled"
        )
        assert "needs ≥ 32×32" in option.text_content()
        note = page.locator("#network-size-note").text_content()
        assert "mobilenet_v3_small" in note and "16×16" in note and "input_size" in note
        assert not page.locator("[name=network] option[value=lenet]").is_disabled()

        page.fill("[name=network_params]", '{"input_size": 32}')
        page.wait_for_function(
            "() => !document.querySelector('[name=network] option[value=mobilenet_v3_small]').disabled"
        )
        page.select_option("[name=network]", "mobilenet_v3_small")
        assert page.locator("#backbone-box").is_visible()
        offered = page.eval_on_selector_all("#weights-picker option", "os => os.map(o => o.value)")
        assert offered[:2] == ["none", "imagenet"] and "zoo:cells-v1" in offered and "zoo:other-net" not in offered
        assert page.input_value("#weights-picker") == "imagenet"  # the network's default, as the field shows
        page.select_option("#weights-picker", "zoo:cells-v1")
        assert page.input_value("[name=weights]") == "zoo:cells-v1"

        page.fill("[name=model_name]", "from the zoo")
        page.click("#create-model")
        page.wait_for_selector("#form-errors")
        errors = page.locator("#form-errors").text_content()
        assert "zoo:cells-v1" in errors and "weights" in errors  # the picked entry reached the server's hash check

        page.select_option("[name=dataset]", large.id)
        page.fill("[name=network_params]", "{}")
        page.wait_for_function(
            "() => !document.querySelector('[name=network] option[value=mobilenet_v3_small]').disabled"
        )
        assert page.locator("#network-size-note").text_content() == ""
        page.select_option("[name=network]", "lenet")
        assert not page.locator("#backbone-box").is_visible()
        assert page.input_value("[name=weights]") == "zoo:cells-v1"  # the user's pick, kept but not for lenet
        # an empty name (the browser's own check removed): the server answers with the page, no job created
        page.eval_on_selector("[name=model_name]", "el => { el.required = false; el.value = ''; }")
        with page.expect_navigation():
            page.click("#create-model")
        errors = page.locator("#form-errors").text_content()
        assert "model_name" in errors and "weights" not in errors  # the kept zoo pick does not apply to lenet
    finally:
        page.context.close()
