"""Secret form fields (PasswordField, e.g. the S3 secret key) never reach job.json or dataset.json."""

from __future__ import annotations

import numpy as np
import pytest
from wtforms import Form, PasswordField, StringField

from digits_core import DataIngestion, registry
from digits_core.datasets import create_dataset, open_dataset
from digits_core.form_secrets import ENV_VAR, MASK, child_env, redact, restore, secret_field_names, stash

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz-very-secret"
SEEN: list = []


class SecretForm(Form):
    token = StringField("Token")
    password = PasswordField("Secret key")


class SecretPlugin(DataIngestion):
    plugin_id = "test-secret-plugin"
    title = "secret"

    @staticmethod
    def get_dataset_form():
        return SecretForm

    @staticmethod
    def get_dataset_template(form):
        return "", {}

    def itemize_entries(self, stage):
        SEEN.append(self.password)
        return [0, 1, 2] if stage == "train" else []

    def encode_entry(self, entry):
        return np.full((2, 2, 1), entry, np.uint8), entry


@pytest.fixture
def secret_plugin():
    registry.register(SecretPlugin)
    yield SecretPlugin
    registry.unregister(SecretPlugin)


def test_helpers():
    assert secret_field_names(SecretForm) == ["password"]
    assert redact({"token": "t", "password": "p"}, ["password"]) == {"token": "t", "password": MASK}
    assert redact({"password": ""}, ["password"]) == {"password": ""}
    stash("job-x", {"password": "p"}, ["password"])
    assert restore("job-x", {"password": MASK, "token": "t"}) == {"password": "p", "token": "t"}
    assert restore("other-job", {"password": MASK}) == {"password": ""}
    # a worker process gets them through its environment, not a file
    env = child_env("job-x")
    assert list(env) == [ENV_VAR] and child_env("other-job") == {}
    import json
    import subprocess
    import sys

    code = (
        "from digits_core.form_secrets import restore, MASK; import json; "
        "print(json.dumps(restore('job-x', {'password': MASK})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**__import__("os").environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == {"password": "p"}


def test_password_fields_are_used_but_never_written(secret_plugin, tmp_path):
    SEEN.clear()
    job = create_dataset("test-secret-plugin", {"token": "visible", "password": SECRET}, workers=1, jobs_dir=tmp_path)
    assert SEEN and set(SEEN) == {SECRET}  # the plugin got the real value
    assert job.data["form_data"] == {"token": "visible", "password": MASK}
    written = [p for p in job.path.rglob("*") if p.is_file()]
    assert any(p.name == "job.json" for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    assert open_dataset(job.id, jobs_dir=tmp_path).userdata["password"] == MASK
