"""TensorFlow's C++ start-up noise is filtered from stderr; real errors and our own output pass."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from digits_core.tf_quiet import is_noise

NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    (
        b"I0000 00:00:1796265130.374197   10169 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
        b"GPU will not be used."
    ),
    b"W0000 00:00:1796265130.373917   10169 port.cc:153] oneDNN custom operations are on.",
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow",
]
CUINIT = (
    b"E0000 00:00:1796265132.611970   10169 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    b"CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)"
)


def test_noise_and_real_errors():
    assert all(is_noise(line, gpu_expected=False) for line in NOISE)
    assert is_noise(CUINIT, gpu_expected=False)
    assert not is_noise(CUINIT, gpu_expected=True), "with an NVIDIA driver a cuInit failure is a real error"
    for real in (
        b"E0000 00:00:1.0   1 op_kernel.cc:1] OOM when allocating tensor",
        b"F0000 00:00:1.0   1 check.cc:1] Check failed: x",
        b'error: Dataset "x" does not exist',
        b"Epoch 1/3 [=====>    ] loss 0.5",
    ):
        assert not is_noise(real, gpu_expected=False)


@pytest.mark.slow
def test_startup_is_quiet_unless_verbose():
    code = (
        "import sys\n"
        "from digits_core.tf_quiet import quiet_tensorflow_startup\n"
        "quiet_tensorflow_startup()\n"
        "import tensorflow as tf\n"
        "print('ours on stderr', file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    quiet = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.strip() == "ours on stderr", quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "0"},
    )  # what `digits -v` sets
    assert "ours on stderr" in loud.stderr and len(loud.stderr.strip().splitlines()) > 1
