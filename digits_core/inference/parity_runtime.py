"""Run an exported model in its own runtime, outside DIGITS Core (a script: ``python parity_runtime.py ...``).

Imports numpy and exactly one runtime: ``onnxruntime`` (onnx), the LiteRT /
TFLite interpreter (tflite), TensorFlow's SavedModel loader (savedmodel) or
Keras (keras). Never imports ``digits_core``, so a parity report shows what a
deployment without DIGITS Core gets.

Usage: ``python parity_runtime.py FORMAT EXPORT_FOLDER INPUTS.npz OUTPUTS.npz``.
``INPUTS.npz`` holds one raw image per key ``"0"``, ``"1"``...; each runs as
a batch of one; ``OUTPUTS.npz`` gets ``"<key>/<output name>"``. The keras
format holds the bare network: its inputs are the prepared images and the
preprocessing of ``info.json`` (mean, scale, centre crop) is applied here.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def _onnx(folder):
    import onnxruntime as ort

    session = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    key = session.get_inputs()[0].name
    return lambda x: dict(zip(names, session.run(None, {key: x})))


def _tflite(folder):
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # older TensorFlow installs ship the interpreter as tf.lite
        import tensorflow as tf

        Interpreter = tf.lite.Interpreter
    interpreter = Interpreter(model_path=os.path.join(folder, "model.tflite"))
    runner = interpreter.get_signature_runner("serving_default")
    return lambda x: runner(images=x)


def _savedmodel(folder):
    import tensorflow as tf

    serve = tf.saved_model.load(os.path.join(folder, "saved_model")).signatures["serving_default"]
    return lambda x: {k: v.numpy() for k, v in serve(images=tf.constant(x)).items()}


def _keras(folder):
    import keras

    with open(os.path.join(folder, "info.json"), encoding="utf-8") as handle:
        prep = json.load(handle)["preprocessing"]
    network_file = os.path.join(folder, "network.py")
    if os.path.isfile(network_file):
        # A custom network's own layers are registered by its file, as a deployment imports it before loading.
        import importlib.util

        spec = importlib.util.spec_from_file_location("digits_exported_network", network_file)
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    model = keras.saving.load_model(os.path.join(folder, "model.keras"), compile=False)
    mean = 0.0
    if prep.get("mean_file") and prep.get("mean_subtraction") in ("image", "pixel"):
        mean = np.load(os.path.join(folder, prep["mean_file"])).astype(np.float32)
        if prep["mean_subtraction"] == "pixel":
            mean = mean.reshape(-1, mean.shape[-1]).mean(axis=0).astype(np.float32)
    crop = prep.get("crop_size")

    def run(x):
        x = (x.astype(np.float32) - mean) * np.float32(prep["scale"])
        if crop:
            top, left = (x.shape[1] - crop) // 2, (x.shape[2] - crop) // 2
            x = x[:, top : top + crop, left : left + crop]
        return {"outputs": np.asarray(model(x, training=False))}

    return run


RUNTIMES = {"onnx": _onnx, "tflite": _tflite, "savedmodel": _savedmodel, "keras": _keras}


def main(argv: list[str]) -> int:
    """Run every input of ``INPUTS.npz`` through the export; write ``OUTPUTS.npz``."""
    fmt, folder, inputs, outputs = argv
    run = RUNTIMES[fmt](folder)
    data = np.load(inputs)
    results = {}
    for key in sorted(data.files, key=int):
        for name, value in run(data[key][None]).items():
            results[f"{key}/{name}"] = np.asarray(value)[0]
    np.savez(outputs, **results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
