"""``detectnet``: a small anchor-free (CenterNet-style) multi-class detector.

Why CenterNet-style: one dense output map, no anchors to tune per dataset,
no non-maximum suppression beyond a 3×3 max-pool (so decoding stays a few
TensorFlow ops inside the exported graph), and a loss made of a per-pixel
focal term plus two L1 terms — cheap enough to train on CPUs.

**Output contract** (also what a custom ``--network`` detector returns): one
tensor ``[batch, H / s, W / s, num_classes + 4]`` for an integer stride
``s`` (the engine reads ``s`` from the shapes):

* channels ``0 .. num_classes-1``: class heat-map **logits** (channel 0,
  ``dontcare``, is trained towards 0 and never decoded);
* ``num_classes``, ``+1``: centre offset logits (x, y) — ``sigmoid`` gives
  the sub-cell position of the box centre;
* ``+2``, ``+3``: log box width and height in output cells.

The backbone: four stride-2 stages (16-32-64-128 channels) and a two-step
top-down path (FPN-like) back to stride 4, then a heat-map head and a box
head. Inputs must have sides divisible by 16.
"""

from __future__ import annotations

import math

#: Output stride of ``detectnet``.
STRIDE = 4
#: Initial heat-map probability (focal-loss prior, RetinaNet's 0.01): bias = -log((1 - p) / p). With 0.1 the
#: background cells' loss swamped the few centres for the first epochs: on 800/200 128x128 digits on clutter
#: (fixed Adam 0.004, seed 1) val recall@0.3 by epoch 1/2/3 was 0/0/0.01 and mAP@0.5 0.004/0.049/0.101;
#: with 0.01, 0/0.106/0.318 and 0/0.195/0.387 (0.001: 0/0.003/0.014, mAP 0/0.079/0.184).
PRIOR = 0.01


def build_detectnet(input_shape, num_outputs: int, width: int = 32, head_width: int = 48):
    """Build ``detectnet`` for ``num_outputs`` classes (dontcare included) on ``input_shape`` images.

    Args:
        input_shape: ``(H, W, C)``; H and W divisible by 16.
        num_outputs: Number of classes, class 0 being ``dontcare``.
        width: Channels of the first stride-4 stage (later stages double it, up to 4×).
        head_width: Channels of the two heads' hidden layers.

    Returns:
        A ``keras.Model`` with one output ``[H/4, W/4, num_outputs + 4]``.
    """
    import keras
    from keras import layers

    h, w = int(input_shape[0]), int(input_shape[1])
    if h % 16 or w % 16:
        from ...errors import TrainingError

        raise TrainingError(
            f"detectnet needs image sides divisible by 16, not {w}x{h}; rebuild the dataset "
            f"with e.g. {max(16, round(w / 16) * 16)}x{max(16, round(h / 16) * 16)}"
        )

    def conv(x, filters, stride=1, kernel=3, name=None):
        x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=name)(x)
        x = layers.BatchNormalization(name=None if name is None else name + "_bn")(x)
        return layers.ReLU()(x)

    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = conv(inputs, width // 2, 2, name="stem")  # /2
    x = conv(x, width, 1, name="s2_conv")
    c4 = conv(x, width, 2, name="s4_down")  # /4
    c4 = conv(c4, width, 1, name="s4_conv")
    c8 = conv(c4, width * 2, 2, name="s8_down")  # /8
    c8 = conv(c8, width * 2, 1, name="s8_conv")
    c16 = conv(c8, width * 4, 2, name="s16_down")  # /16
    c16 = conv(c16, width * 4, 1, name="s16_conv")
    p8 = layers.Add()(
        [
            layers.UpSampling2D(2)(conv(c16, width * 2, kernel=1, name="lat16")),
            conv(c8, width * 2, kernel=1, name="lat8"),
        ]
    )
    p8 = conv(p8, width * 2, name="p8_conv")
    p4 = layers.Add()(
        [
            layers.UpSampling2D(2)(conv(p8, width * 2, kernel=1, name="lat8_up")),
            conv(c4, width * 2, kernel=1, name="lat4"),
        ]
    )
    p4 = conv(p4, width * 2, name="p4_conv")
    heat = layers.Conv2D(head_width, 3, padding="same", activation="relu", name="heat_hidden")(p4)
    heat = layers.Conv2D(
        num_outputs, 1, name="heat_logits", bias_initializer=keras.initializers.Constant(-math.log((1 - PRIOR) / PRIOR))
    )(heat)
    box = layers.Conv2D(head_width, 3, padding="same", activation="relu", name="box_hidden")(p4)
    box = layers.Conv2D(4, 1, name="box_regression")(box)
    outputs = layers.Concatenate(name="detections_map")([heat, box])
    return keras.Model(inputs, outputs, name="detectnet")


def build_model(input_shape, num_outputs, **params):
    """The ``build_model`` entry point of the built-in ``detectnet`` network."""
    return build_detectnet(input_shape, num_outputs, **params)
