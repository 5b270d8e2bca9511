"""Building a backbone network (imports Keras; only called when a run builds its model).

The graph: input (H×W×C pixels as stored, 0-255 for 8-bit images) → optional
resize (``input_size``) → the backbone's own preprocessing → the
``keras.applications`` encoder, wrapped as a nested model named ``backbone``
(the engine freezes and slows exactly its variables) → global average pooling
→ dropout → a dense head (softmax probabilities for classification, linear
for regression). Everything is in the graph, so inference and exports see
the same model.

Weights trained on 3-channel images load into any channel count: the first
convolution's kernel is adapted as timm's ``adapt_input_conv`` does (the sum
of its RGB kernels for 1 channel; repeated and scaled by 3/N for N channels).
With pretrained weights the encoder's BatchNorm layers are fixed, in
inference mode (Keras's transfer-learning guide: statistics learned on
ImageNet must not be overwritten by a small target set's batches), also after
the backbone is unfrozen.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from digits_core import TrainingError

from .catalog import IMAGENET_MEAN, IMAGENET_STD, Backbone

#: The nested encoder's name (the engine's fine-tuning finds the backbone's variables by it).
BACKBONE_LAYER = "backbone"


def adapt_input_conv(kernel: np.ndarray, channels: int) -> np.ndarray:
    """A first-convolution kernel (H×W×in×out) trained on ``in`` channels, adapted to ``channels`` inputs.

    1 channel: the sum over the input channels (a grey image equals R = G = B). N channels: the kernel
    repeated along the input axis, cut to N and scaled by in/N, so the response to an image whose
    channels are all equal stays the same.
    """
    kernel = np.asarray(kernel, dtype=np.float32)
    have = kernel.shape[2]
    if channels == have:
        return kernel
    if channels == 1:
        return kernel.sum(axis=2, keepdims=True)
    repeats = math.ceil(channels / have)
    return np.tile(kernel, (1, 1, repeats, 1))[:, :, :channels, :] * (have / channels)


def _preprocess(keras, kind: str, channels: int):
    if kind == "tf":
        return keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="backbone_preprocessing")
    mean, std = np.array(IMAGENET_MEAN), np.array(IMAGENET_STD)
    if channels != 3:  # one statistic for channels that stand for grey or for other modalities
        mean, std = np.full(channels, mean.mean()), np.full(channels, std.mean())
    # (x - mean) / std as a rescaling whose factors are written into the graph: a Normalization layer's
    # statistics are eager tensors that tf2onnx turns into extra graph inputs (ONNX Runtime then refuses to run)
    return keras.layers.Rescaling(
        scale=(1.0 / std).tolist(), offset=(-mean / std).tolist(), name="backbone_preprocessing"
    )


def _encoder(keras, backbone: Backbone, size: tuple[int, int], channels: int):
    make = getattr(keras.applications, backbone.app)
    with warnings.catch_warnings():  # "usually expects 1 or 3 input channels": any count is the point here
        warnings.filterwarnings("ignore", message=".*input channels", category=UserWarning)
        return make(include_top=False, weights=None, input_shape=(*size, channels), **backbone.app_kwargs)


def load_encoder_weights(keras, backbone: Backbone, encoder, path: str, channels_in_file: int | None) -> None:
    """Load ``path`` into ``encoder``, adapting the first convolution when the channel counts differ.

    Raises:
        TrainingError: The file does not fit this backbone (naming it).
    """
    channels = int(encoder.inputs[0].shape[-1])
    source_channels = channels_in_file or 3
    try:
        if source_channels == channels:
            encoder.load_weights(path)
            return
        size = tuple(int(d) for d in encoder.inputs[0].shape[1:3])
        source = _encoder(keras, backbone, size, source_channels)  # type: ignore[arg-type]
        source.load_weights(path)
    except (ValueError, OSError, KeyError) as exc:
        raise TrainingError(
            f"weights {path}: does not fit {backbone.name} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        ) from None
    adapted = 0
    for src, dst in zip(source.weights, encoder.weights, strict=True):
        value = src.numpy()
        if tuple(value.shape) != tuple(dst.shape):
            value = adapt_input_conv(value, channels)
            adapted += 1
        dst.assign(value)
    if adapted != 1:
        raise TrainingError(f"weights {path}: {adapted} kernels differ in shape from {backbone.name}'s, expected 1.")


def freeze_batchnorm(keras, model) -> int:
    """Fix every BatchNormalization layer of ``model`` (inference mode, statistics and scale kept); their count.

    A Keras 3 functional model hands its caller's ``training`` flag to every layer, so calling the encoder
    with ``training=False`` does not hold; a layer that is not trainable runs in inference mode.
    """
    frozen = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.trainable = False
            frozen += 1
        elif getattr(layer, "layers", None):  # nested blocks (ConvNeXt's stem is a Sequential)
            frozen += freeze_batchnorm(keras, layer)
    return frozen


def stage_features(encoder, levels: int = 5) -> list:
    """The encoder's stage outputs at strides 2, 4, ... 2**levels, finest first (a stride it skips is left out).

    Read from the graph, not from per-backbone layer names, so any ``keras.applications`` encoder works: for
    each stride, the last layer whose output has the input's size divided by it (rounded either way, as
    "same" and "valid" convolutions round); padding layers and squeeze-and-excitation 1×1 maps do not match.
    """
    height, width = (int(d) for d in encoder.inputs[0].shape[1:3])
    outputs = []
    for k in range(1, levels + 1):
        stride = 2**k
        rows = {height // stride, -(-height // stride)}
        cols = {width // stride, -(-width // stride)}
        found = None
        for layer in encoder.layers[1:]:
            shape = tuple(getattr(getattr(layer, "output", None), "shape", ()) or ())
            if len(shape) == 4 and shape[1] in rows and shape[2] in cols:
                found = layer.output
        if found is not None and (not outputs or tuple(found.shape[1:3]) != tuple(outputs[-1].shape[1:3])):
            outputs.append(found)
    return outputs


def unet_decoder(keras, features: list, size: tuple[int, int], classes: int, filters: int):
    """A U-Net decoder: from the coarsest stage up, resize to the next finer stage, concatenate it, two 3×3
    convolutions (BatchNorm, ReLU); then up to the input's size and a per-pixel softmax over ``classes``."""
    layers = keras.layers
    x = features[-1]
    for level, skip in reversed(list(enumerate(features[:-1]))):
        width = filters * 2**level
        x = layers.Resizing(*skip.shape[1:3], interpolation="bilinear", name=f"decoder{level}_up")(x)
        x = layers.Concatenate(name=f"decoder{level}_concat")([x, skip])
        for i in (1, 2):
            x = layers.Conv2D(width, 3, padding="same", use_bias=False, name=f"decoder{level}_conv{i}")(x)
            x = layers.BatchNormalization(name=f"decoder{level}_bn{i}")(x)
            x = layers.Activation("relu", name=f"decoder{level}_relu{i}")(x)
    x = layers.Resizing(*size, interpolation="bilinear", name="decoder_full_size")(x)
    x = layers.Conv2D(filters, 3, padding="same", activation="relu", name="decoder_head_conv")(x)
    x = layers.Conv2D(classes, 1, name="score")(x)
    return layers.Softmax(axis=-1, name="probabilities")(x)


#: Initial heat-map probability of the detection head (the focal-loss prior DIGITS Core's detectnet uses).
HEAT_PRIOR = 0.01


def detection_head(keras, features: list, size: tuple[int, int], classes: int, width: int):
    """``detectnet``'s output on a backbone: a top-down path (FPN-like) over the stages at strides 4 to 32
    back to stride 4, then a heat-map head (class logits, bias at :data:`HEAT_PRIOR`) and a box head
    (2 centre-offset logits, log width and height): ``[H/4, W/4, classes + 4]``, the engine's detection
    contract (``digits_core.engine.detection.network``)."""
    layers = keras.layers
    target = (size[0] // 4, size[1] // 4)
    levels = [f for f in features if f.shape[1] <= -(-size[0] // 4)]  # strides 4 and up

    def conv(x, filters, kernel, name):
        x = layers.Conv2D(filters, kernel, padding="same", use_bias=False, name=name)(x)
        x = layers.BatchNormalization(name=f"{name}_bn")(x)
        return layers.ReLU(name=f"{name}_relu")(x)

    x = conv(levels[-1], width, 1, f"fpn{len(levels) - 1}_lateral")
    for level, feature in reversed(list(enumerate(levels[:-1]))):
        x = layers.Resizing(*feature.shape[1:3], interpolation="bilinear", name=f"fpn{level}_up")(x)
        x = layers.Add(name=f"fpn{level}_add")([x, conv(feature, width, 1, f"fpn{level}_lateral")])
        x = conv(x, width, 3, f"fpn{level}_conv")
    if tuple(x.shape[1:3]) != target:
        x = layers.Resizing(*target, interpolation="bilinear", name="fpn_stride4")(x)
    prior = keras.initializers.Constant(-math.log((1 - HEAT_PRIOR) / HEAT_PRIOR))
    heat = layers.Conv2D(width, 3, padding="same", activation="relu", name="heat_hidden")(x)
    heat = layers.Conv2D(classes, 1, name="heat_logits", bias_initializer=prior)(heat)
    box = layers.Conv2D(width, 3, padding="same", activation="relu", name="box_hidden")(x)
    box = layers.Conv2D(4, 1, name="box_regression")(box)
    return layers.Concatenate(name="detections_map")([heat, box])


def build_backbone_model(
    backbone: Backbone,
    input_shape,
    num_outputs: int,
    *,
    task: str = "classification",
    weights_file: str | None = None,
    weights_channels: int | None = None,
    input_size: int | None = None,
    dropout: float = 0.2,
    decoder_filters: int = 16,
    **_: object,
):
    """The network (see the module docstring).

    Args:
        backbone: The encoder.
        input_shape: ``(H, W, C)``.
        num_outputs: Classes, or regression outputs.
        task: ``classification`` (softmax head), ``regression`` (linear head), ``segmentation`` (a U-Net
            decoder on the encoder's stages, per-pixel softmax at the input's size) or ``detection``
            (``detectnet``'s heads on a top-down path over the stages, stride 4).
        weights_file: A checked weights file to start from (``None``: random weights).
        weights_channels: Input channels the file was trained with (``None``: 3).
        input_size: Resize to ``input_size`` × ``input_size`` in the graph.
        dropout: Dropout rate before the head.
        decoder_filters: Segmentation: filters of the decoder's finest level (doubled per level up);
            detection: a quarter of the top-down path's and heads' width.

    Raises:
        TrainingError: An input smaller than the backbone's minimum (naming it), or weights that do not fit.
    """
    import keras

    height, width, channels = (int(d) for d in input_shape)
    size = (int(input_size), int(input_size)) if input_size else (height, width)
    if min(size) < backbone.min_size:
        raise TrainingError(
            f"Network {backbone.name} needs inputs of at least {backbone.min_size}x{backbone.min_size} pixels; "
            f"the images are {height}x{width}: resize the dataset, or let the network resize them with "
            f"--network-param input_size={backbone.min_size} (or larger)."
        )
    inputs = keras.Input((height, width, channels), name="image")
    x = inputs
    if input_size:
        x = keras.layers.Resizing(*size, name="backbone_resize")(x)
    x = _preprocess(keras, backbone.preprocessing, channels)(x)
    app = _encoder(keras, backbone, size, channels)
    if weights_file:
        load_encoder_weights(keras, backbone, app, weights_file, weights_channels)
    if weights_file:
        freeze_batchnorm(keras, app)
    if task in ("segmentation", "detection"):
        skips = stage_features(app)
        encoder = keras.Model(app.inputs[0], skips, name=BACKBONE_LAYER)
        if task == "detection":
            x = detection_head(keras, encoder(x), (height, width), int(num_outputs), decoder_filters * 4)
            return keras.Model(inputs, x, name=f"{backbone.name}_detectnet")
        x = unet_decoder(keras, encoder(x), (height, width), int(num_outputs), decoder_filters)
        return keras.Model(inputs, x, name=f"{backbone.name}_unet")
    encoder = keras.Model(app.inputs[0], app.output, name=BACKBONE_LAYER)
    x = encoder(x)
    x = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    if dropout:
        x = keras.layers.Dropout(float(dropout), name="head_dropout")(x)
    x = keras.layers.Dense(int(num_outputs), name="head")(x)
    if task == "classification":
        x = keras.layers.Softmax(name="probabilities")(x)
    return keras.Model(inputs, x, name=backbone.name)
