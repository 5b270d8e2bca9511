"""Benchmark: what "Show visualizations and statistics" costs next to the prediction itself.

For each built-in network (random weights, its usual input size), in the same run:

* **baseline**: one image through ``model(x, training=False)`` (the forward pass a prediction
  pays, model already built);
* **visualizations**: :func:`digits_core.inference.visualize.layer_visualizations` for that
  image (one forward pass returning every layer's output, the statistics of every tensor,
  the bounded pictures) plus ``to_json()`` (PNG encoding, data URIs), i.e. what the inference
  worker adds to a request.

Each figure is the median of ``--repeat`` runs after one warm-up. It prints the layer count,
the JSON size the results page carries, both times and their ratio::

    .venv/bin/python bench/layer_vis.py [--repeat 5] [--networks lenet,unet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from types import SimpleNamespace

import numpy as np

#: network -> (input shape, outputs)
NETWORKS = {
    "lenet": ((28, 28, 1), 10),
    "alexnet": ((256, 256, 3), 10),
    "googlenet": ((224, 224, 3), 10),
    "unet": ((128, 128, 1), 3),
    "fcn": ((128, 128, 3), 3),
}


def _median_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--networks", default=",".join(NETWORKS))
    args = parser.parse_args()

    from digits_core.engine.networks import builtin
    from digits_core.engine.preprocessing import Preprocessing
    from digits_core.inference.visualize import layer_visualizations, network_input

    print(f"{'network':<10} {'layers':>6} {'JSON KB':>8} {'forward s':>10} {'vis s':>8} {'vis/forward':>12}")
    for name in args.networks.split(","):
        shape, outputs = NETWORKS[name]
        keras_model = getattr(builtin, name)(shape, outputs)
        model = SimpleNamespace(
            model=keras_model,
            preprocessing=Preprocessing("none", None, 1 / 255, None, shape),
            describe=lambda: {"id": "bench"},
        )
        raw = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
        x = network_input(model, raw)
        forward = _median_seconds(lambda: keras_model(x, training=False), args.repeat)
        sizes = []
        vis = _median_seconds(
            lambda: sizes.append(len(json.dumps(layer_visualizations(model, raw).to_json()))), args.repeat
        )
        print(
            f"{name:<10} {len(keras_model.layers):>6} {sizes[-1] / 1024:>8.0f} {forward:>10.4f} {vis:>8.3f} "
            f"{vis / forward:>11.1f}x"
        )


if __name__ == "__main__":
    main()
