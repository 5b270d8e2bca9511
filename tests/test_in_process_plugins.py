"""Embedding: a plugin class defined in __main__ works with workers > 1 after TensorFlow loads; TF stays quiet."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import logging, os, sys
    if {block_cloudpickle!r}:
        sys.modules["cloudpickle"] = None  # as if it were not installed
    logging.basicConfig(level=logging.WARNING)
    import numpy as np
    import tensorflow  # noqa: F401  from now on encoder workers come from a forkserver, not fork
    from wtforms import Form, IntegerField
    from digits_core import DataIngestion, registry
    from digits_core.datasets import create_dataset

    class ArrayIngestion(DataIngestion):
        plugin_id = "array-ingestion"

        @staticmethod
        def get_dataset_form():
            return type("F", (Form,), {{"count": IntegerField(default=12)}})

        @staticmethod
        def get_dataset_template(form):
            return "{{{{ form.count }}}}", {{}}

        def itemize_entries(self, stage):
            return list(range(int(self.count))) if stage in ("train", "val") else []

        def encode_entry(self, entry):
            return np.full((4, 4, 1), entry * 10 + os.getpid() % 7, np.uint8), entry % 2

    registry.register(ArrayIngestion)
    job = create_dataset("array-ingestion", {{"count": 12}}, workers=2, jobs_dir=sys.argv[1])
    print(job.status.value, "stages", job.data.get("dataset", {{}}).get("stages"))
""")


def _run(tmp_path, block_cloudpickle):
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(block_cloudpickle=block_cloudpickle), str(tmp_path / "jobs")],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_main_module_plugin_with_two_workers_after_tensorflow(tmp_path):
    shipped = _run(tmp_path / "a", False)
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    assert "Done stages {'train': 12, 'val': 12}" in shipped.stdout
    assert "Can't get attribute" not in shipped.stderr and "encoding with 1 worker" not in shipped.stderr
    fallback = _run(tmp_path / "b", True)  # no cloudpickle: one worker, and a plain message saying why
    assert fallback.returncode == 0, fallback.stderr[-2000:]
    assert "Done stages {'train': 12, 'val': 12}" in fallback.stdout
    assert "defined in __main__" in fallback.stderr and "Install cloudpickle" in fallback.stderr


@pytest.mark.slow
def test_quiet_tensorflow_keeps_the_cxx_start_up_lines_off_stderr():
    # Keras loads without importing scikit-learn (tf_quiet.import_tensorflow), which stays importable afterwards.
    code = (
        "import sys, digits_core\ndigits_core.quiet_tensorflow()\nimport tensorflow as tf\nimport keras\n"
        "assert 'sklearn' not in sys.modules, 'Keras imported scikit-learn'\nimport sklearn.base\n"
        "print(tf.constant(2).numpy())\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == 0 and quiet.stdout.strip() == "2", quiet.stderr[-2000:]
    assert "absl::InitializeLog" not in quiet.stderr and "oneDNN" not in quiet.stderr, quiet.stderr
