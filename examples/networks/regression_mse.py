"""A custom regression network with an MSE loss (DIGITS's "regression" custom-network example).

Train it on a dataset with float labels (one or more values per image)::

    digits train --dataset ID --network examples/networks/regression_mse.py --name reg

``build_model`` receives the input shape after cropping and the number of
label values, and returns the model plus the loss and metrics to use.
"""

import keras

DEFAULTS = {"solver": "adam", "learning_rate": 0.001}  # used when the user does not set them


def build_model(input_shape, num_outputs, width=32, **params):
    inputs = keras.Input(shape=input_shape, name="image")
    x = keras.layers.Conv2D(width, 3, padding="same", activation="relu", name="conv1")(inputs)
    x = keras.layers.MaxPooling2D(2, name="pool1")(x)
    x = keras.layers.Conv2D(2 * width, 3, padding="same", activation="relu", name="conv2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    x = keras.layers.Dense(64, activation="relu", name="fc1")(x)
    outputs = keras.layers.Dense(num_outputs, name="output")(x)  # linear: regression
    model = keras.Model(inputs, outputs, name="regression_mse")
    return model, "mse", ["mae"]
