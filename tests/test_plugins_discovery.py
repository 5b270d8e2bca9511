"""Discovery of real, pip-installed plugin distributions through entry points."""

from __future__ import annotations

import json

import pytest


def _by_name(records, distribution):
    return {r["name"]: r for r in records if r["distribution"] == distribution}


def test_installed_plugin_is_found_through_its_entry_points(sample_plugin_paths, list_plugins):
    from digits_core.plugins import hookspecs

    listed = [
        r for r in list_plugins(pythonpath=[sample_plugin_paths["basic"]]) if r["distribution"] == "digits-sample-basic"
    ]
    # Its hooks module also registers a data and a view plugin through the register hooks.
    assert {(r["kind"], r["name"], r["id"]) for r in listed} == {
        ("data", "sample-numbers", "sample-numbers"),
        ("view", "sample-text", "sample-text"),
        ("hooks", "sample-hooks", None),
        ("data", "sample-hooks", "sample-hook-numbers"),
        ("view", "sample-hooks", "sample-hook-text"),
    }
    records = {r["name"]: r for r in listed if r["id"] in ("sample-numbers", "sample-text", None)}
    data = records["sample-numbers"]
    assert (data["kind"], data["id"], data["title"], data["category"]) == (
        "data",
        "sample-numbers",
        "Sample numbers",
        "Samples",
    )
    assert (data["version"], data["status"], data["error"]) == ("1.2.3", "loaded", None)
    assert records["sample-text"]["kind"] == "view" and records["sample-text"]["status"] == "loaded"
    hooks = records["sample-hooks"]
    assert hooks["kind"] == "hooks"
    assert hooks["hooks"] == sorted(name for name in vars(hookspecs) if name.startswith("digits_"))


def test_plugin_is_absent_when_not_installed(list_plugins):
    assert not [r for r in list_plugins() if r["distribution"] == "digits-sample-basic"]


def test_broken_plugins_are_reported_and_the_rest_still_loads(sample_plugin_paths, list_plugins):
    records = list_plugins(pythonpath=[sample_plugin_paths["basic"], sample_plugin_paths["broken"]])
    broken = _by_name(records, "digits-sample-broken")
    expected_errors = {
        "raises-on-import": "RuntimeError: boom at import of the sample plugin",
        "not-a-subclass": "is not a subclass of digits_core.DataIngestion",
        "duplicate-id": 'id "image-classification" is already used by the bundled plugin digits_data_images',
        "missing-methods": "does not implement required methods: encode_entry, get_dataset_template",
        "bad-id": "malformed plugin id 'Bad Id!'",
        "no-hooks": "implements no digits hook",
        "reserved-field": "get_dataset_form(): form field(s) is_inference_db use a name the framework owns",
    }
    assert set(broken) == set(expected_errors)
    for name, fragment in expected_errors.items():
        record = broken[name]
        assert record["status"] == "failed", record
        assert fragment in record["error"], record
        assert record["version"] == "0.0.1"
    good = _by_name(records, "digits-sample-basic")
    assert {r["status"] for r in good.values()} == {"loaded"}


def test_table_output_shows_failures_with_their_errors(sample_plugin_paths, digits_cli):
    result = digits_cli("plugins", pythonpath=[sample_plugin_paths["basic"], sample_plugin_paths["broken"]])
    assert result.returncode == 0
    assert "sample-numbers" in result.stdout
    assert "failed: raises-on-import (digits-sample-broken)" in result.stdout
    assert "boom at import" in result.stdout


def test_duplicate_distributions_count_once(sample_plugin_paths, list_plugins):
    records = list_plugins(pythonpath=[sample_plugin_paths["basic"], sample_plugin_paths["basic_copy"]])
    numbers = [r for r in records if r["id"] == "sample-numbers"]
    assert len(numbers) == 1 and numbers[0]["status"] == "loaded"


def test_allow_list_loads_only_named_plugins(sample_plugin_paths, list_plugins):
    paths = [sample_plugin_paths["basic"], sample_plugin_paths["broken"]]
    records = list_plugins(pythonpath=paths, env={"DIGITS_LOAD_PLUGINS": "sample-numbers"})
    loaded = {r["name"] for r in records if r["status"] == "loaded"}
    assert loaded == {"sample-numbers"}
    text = _by_name(records, "digits-sample-basic")["sample-text"]
    assert text["status"] == "disabled" and "DIGITS_LOAD_PLUGINS" in text["error"]
    # Disabled plugins are not even imported: the import-time failure never happens.
    assert _by_name(records, "digits-sample-broken")["raises-on-import"]["status"] == "disabled"


def test_allow_list_matches_distribution_names(sample_plugin_paths, list_plugins):
    records = list_plugins(
        pythonpath=[sample_plugin_paths["basic"]], env={"DIGITS_LOAD_PLUGINS": "digits-sample-basic"}
    )
    assert {r["name"] for r in records if r["status"] == "loaded"} == {"sample-numbers", "sample-text", "sample-hooks"}


def test_empty_allow_list_loads_nothing(sample_plugin_paths, list_plugins):
    records = list_plugins(pythonpath=[sample_plugin_paths["basic"]], env={"DIGITS_LOAD_PLUGINS": ""})
    assert records and all(r["status"] == "disabled" for r in records)


def test_block_list_disables_named_plugins(sample_plugin_paths, list_plugins):
    paths = [sample_plugin_paths["basic"], sample_plugin_paths["broken"]]
    records = list_plugins(pythonpath=paths, env={"DIGITS_DISABLE_PLUGINS": "raises-on-import, sample-text"})
    assert _by_name(records, "digits-sample-broken")["raises-on-import"]["status"] == "disabled"
    basic = _by_name(records, "digits-sample-basic")
    assert basic["sample-text"]["status"] == "disabled"
    assert basic["sample-numbers"]["status"] == "loaded"
    # Without --all, disabled plugins are not listed.
    shown = list_plugins(pythonpath=paths, env={"DIGITS_DISABLE_PLUGINS": "sample-text"}, all_=False)
    assert "sample-text" not in {r["name"] for r in shown}


def test_strict_mode_raises_error_loading_plugin(sample_plugin_paths, digits_cli):
    result = digits_cli(
        "plugins",
        pythonpath=[sample_plugin_paths["basic"], sample_plugin_paths["broken"]],
        env={"DIGITS_STRICT_PLUGINS": "1", "DIGITS_LOAD_PLUGINS": "digits-sample-basic,digits-sample-broken"},
    )
    assert result.returncode == 1
    assert (
        'error: Error loading plugin "raises-on-import": import of digits_sample_broken.raises:Plugin raised RuntimeError'
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_bundled_plugins_are_listed_with_versions(list_plugins):
    records = list_plugins()
    bundled = {
        (r["kind"], r["name"]): r
        for r in records
        if (r["distribution"] or "").startswith("digits-") and r["distribution"] != "digits-core"
    }
    expected = {
        ("data", "image-classification"): "digits-data-images",
        ("data", "image-segmentation"): "digits-data-images",
        ("data", "image-sunnybrook"): "digits-data-sunnybrook",
        ("view", "image-classification"): "digits-view-classification",
        ("view", "image-segmentation"): "digits-view-segmentation",
    }
    for key, distribution in expected.items():
        assert key in bundled, f"{key} not discovered; is {distribution} installed (make setup)?"
        assert bundled[key]["distribution"] == distribution
        assert bundled[key]["version"]
        assert bundled[key]["status"] == "loaded", bundled[key]


@pytest.mark.parametrize("args", [["plugins"], ["plugins", "--json", "--all"], ["--help"], ["--version"]])
def test_listing_and_help_do_not_import_heavy_libraries(args, digits_cli):
    result = digits_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.heavy_modules == [], f"`digits {' '.join(args)}` imported {result.heavy_modules}"


def test_version_and_help_output(digits_cli):
    import digits_core

    assert digits_cli("--version").stdout.strip() == f"digits-core {digits_core.__version__}"
    help_text = digits_cli("--help").stdout
    assert "plugins" in help_text and "--jobs-dir" in help_text


def test_json_is_machine_readable(sample_plugin_paths, digits_cli):
    result = digits_cli("plugins", "--json", pythonpath=[sample_plugin_paths["basic"]])
    records = json.loads(result.stdout)
    keys = {"kind", "name", "id", "title", "category", "distribution", "version", "status", "error", "source", "hooks"}
    assert all(set(r) == keys for r in records)
