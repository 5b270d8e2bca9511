"""Id clashes between installed distributions, and kind-qualified names in the env lists (real pip installs)."""

from __future__ import annotations

import pytest
from conftest import SAMPLE_PLUGINS, pip_install_target

pytestmark = pytest.mark.slow  # pip installs and `digits` subprocesses


@pytest.fixture(scope="module")
def clash_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("clash-plugins")
    return [
        pip_install_target(SAMPLE_PLUGINS / "basic", root / "basic"),
        pip_install_target(SAMPLE_PLUGINS / "clash", root / "clash"),
    ]


def _find(records, kind, plugin_id, distribution):
    return next(
        r for r in records if (r["kind"], r["id"] or r["name"], r["distribution"]) == (kind, plugin_id, distribution)
    )


def test_clash_policy_does_not_depend_on_distribution_names(clash_paths, list_plugins):
    records = list_plugins(pythonpath=clash_paths)
    clash = "aaa-digits-sample-clash"  # sorts first: it used to take these ids over
    # A bundled id is kept by the bundled plugin; the newcomer fails and is told how to replace it on purpose.
    view = _find(records, "view", "image-classification", clash)
    assert view["status"] == "failed"
    assert 'id "image-classification" is already used by the bundled plugin' in view["error"]
    assert "replaces_bundled = True" in view["error"]
    assert "or disable the bundled one with DIGITS_DISABLE_PLUGINS=digits-view-classification" in view["error"]
    assert _find(records, "view", "image-classification", "digits-view-classification")["status"] == "loaded"
    # Kinds are separate: the bundled *data* plugin of the same id is unaffected.
    assert _find(records, "data", "image-classification", "digits-data-images")["status"] == "loaded"
    # replaces_bundled = True replaces the bundled plugin, which is listed as disabled (replaced).
    assert _find(records, "data", "image-segmentation", clash)["status"] == "loaded"
    bundled = _find(records, "data", "image-segmentation", "digits-data-images")
    assert (
        bundled["status"] == "disabled" and "replaced by digits_sample_clash.SegmentationOnPurpose" in bundled["error"]
    )
    # Two third-party distributions claiming one id: neither loads, each names the other.
    for distribution, other in (
        (clash, "digits_sample_basic.NumbersIngestion"),
        ("digits-sample-basic", "digits_sample_clash.NumbersAgain"),
    ):
        record = _find(records, "data", "sample-numbers", distribution)
        assert record["status"] == "failed" and f"also claimed by {other}" in record["error"]


def test_disabling_one_distribution_resolves_a_third_party_clash(clash_paths, list_plugins):
    records = list_plugins(pythonpath=clash_paths, env={"DIGITS_DISABLE_PLUGINS": "aaa-digits-sample-clash"})
    assert _find(records, "data", "sample-numbers", "digits-sample-basic")["status"] == "loaded"
    assert _find(records, "data", "image-segmentation", "digits-data-images")["status"] == "loaded"


@pytest.mark.parametrize("variable", ["DIGITS_DISABLE_PLUGINS", "DIGITS_LOAD_PLUGINS"])
def test_kind_qualified_ids_select_one_kind_only(variable, list_plugins):
    records = list_plugins(env={variable: "view:image-classification"})
    view = _find(records, "view", "image-classification", "digits-view-classification")
    data = _find(records, "data", "image-classification", "digits-data-images")
    if variable == "DIGITS_DISABLE_PLUGINS":
        assert view["status"] == "disabled" and data["status"] == "loaded"
    else:
        assert view["status"] == "loaded" and data["status"] == "disabled"
