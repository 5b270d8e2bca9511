"""A Siamese network (DIGITS's second custom-network example).

The dataset stores each pair as one image with two channels (channel 0 =
first image, channel 1 = second image) and the label 1 when both show the
same class, 0 otherwise. Both images go through the *same* tower (shared
weights); the head compares the two embeddings (absolute difference) and
outputs the probabilities of "different" and "same", so the engine's usual
classification loss and metrics apply::

    digits train --dataset PAIRS_ID --network examples/networks/siamese.py --name siamese

Custom layers are registered with ``keras.saving.register_keras_serializable``;
the engine keeps a copy of this file in the model job, so snapshots reload
anywhere with ``load_snapshot(job)``. The trained tower is an embedding:
``load_snapshot(job).get_layer("tower")``.
"""

import keras

# Adam 0.005 (was 0.001): on 1,000 pairs of handwritten digits, val pair accuracy 0.575 after 10 epochs at
# 0.001 (barely above chance), 0.79 at 0.005 (tests/test_quality_floors.py keeps a floor)
DEFAULTS = {"solver": "adam", "learning_rate": 0.005}


@keras.saving.register_keras_serializable(package="siamese_example")
class TakeChannel(keras.layers.Layer):
    """Channel ``index`` of the input, kept as a 1-channel image."""

    def __init__(self, index, **kwargs):
        super().__init__(**kwargs)
        self.index = index

    def call(self, x):
        return x[..., self.index : self.index + 1]

    def get_config(self):
        return {**super().get_config(), "index": self.index}


@keras.saving.register_keras_serializable(package="siamese_example")
class AbsDifference(keras.layers.Layer):
    """|a - b|, element-wise."""

    def call(self, inputs):
        a, b = inputs
        return keras.ops.abs(a - b)


def _tower(shape, width):
    inputs = keras.Input(shape=shape)
    x = keras.layers.Conv2D(width, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(2 * width, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(32, name="embedding")(x)
    return keras.Model(inputs, x, name="tower")


def build_model(input_shape, num_outputs, width=16, **params):
    height, width_px, channels = input_shape
    if channels != 2:
        raise ValueError(f"the Siamese network needs 2-channel pair images, got {channels} channel(s)")
    pair = keras.Input(shape=input_shape, name="pair")
    tower = _tower((height, width_px, 1), width)  # one tower, used twice: shared weights
    first = tower(TakeChannel(0, name="first")(pair))
    second = tower(TakeChannel(1, name="second")(pair))
    diff = AbsDifference(name="abs_difference")([first, second])
    outputs = keras.layers.Dense(num_outputs, activation="softmax", name="probabilities")(diff)
    return keras.Model(pair, outputs, name="siamese")
