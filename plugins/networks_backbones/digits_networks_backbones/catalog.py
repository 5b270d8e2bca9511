"""The backbones this plugin offers, declared as data (no TensorFlow).

Each :class:`Backbone` names its ``keras.applications`` constructor, the
preprocessing its weights were trained with (kept inside the graph), its
minimum input size and the ImageNet weights file Keras publishes for it: the
file name and hash are Keras's own (``keras/src/applications/*.py``), so a
file found in Keras's cache (``$KERAS_HOME/models``) is the same file Keras
would use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_KERAS_WEIGHTS = "https://storage.googleapis.com/tensorflow/keras-applications/"
#: What the ImageNet weight files are published under.
KERAS_WEIGHTS_LICENSE = "Apache-2.0 (Keras applications weights; trained on ImageNet, whose terms of access apply)"

#: ImageNet per-channel mean and standard deviation on 0-255 pixels (the "torch" preprocessing).
IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


@dataclass(frozen=True)
class Backbone:
    """One pretrained encoder.

    Attributes:
        name: The network name users type (``mobilenet_v3_small``).
        app: The ``keras.applications`` constructor's name (``MobileNetV3Small``).
        title: One line for listings.
        preprocessing: ``tf`` (pixels 0-255 to [-1, 1]) or ``torch`` (ImageNet mean and std on 0-255 pixels).
        weights_file: Keras's file name of the ImageNet weights without the classifier.
        weights_hash: Keras's hash of that file (MD5, or SHA-256 when 64 digits long).
        weights_origin: Keras's URL of that file.
        min_size: Smallest input height and width (``keras.applications`` refuses less than 32).
        app_kwargs: Extra constructor arguments (the built-in preprocessing is turned off: ours
            handles any channel count).
        parameters: Parameters of the encoder alone (for the docs table).
    """

    name: str
    app: str
    title: str
    preprocessing: str
    weights_file: str
    weights_hash: str
    weights_origin: str
    min_size: int = 32
    app_kwargs: dict = field(default_factory=dict)
    parameters: int = 0

    def weights_table(self) -> dict:
        """The network's declared weights (``NetworkSpec.weights``)."""
        return {
            "imagenet": {
                "file": self.weights_file,
                "hash": self.weights_hash,
                "origin": self.weights_origin,
                "license": KERAS_WEIGHTS_LICENSE,
            }
        }


def _keras(folder: str, file: str) -> str:
    return f"{_KERAS_WEIGHTS}{folder}/{file}"


_NO_PREP = {"include_preprocessing": False}

#: Every backbone, by network name.
BACKBONES: dict[str, Backbone] = {
    b.name: b
    for b in (
        Backbone(
            "mobilenet_v3_small",
            "MobileNetV3Small",
            "MobileNetV3-Small (ImageNet)",
            "tf",
            "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5",
            "d3e8ec802a04aa4fc771ee12a9a9b836",
            _keras("mobilenet_v3", "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5"),
            app_kwargs=_NO_PREP,
            parameters=939_120,
        ),
        Backbone(
            "mobilenet_v3_large",
            "MobileNetV3Large",
            "MobileNetV3-Large (ImageNet)",
            "tf",
            "weights_mobilenet_v3_large_224_1.0_float_no_top_v2.h5",
            "07fb09a5933dd0c8eaafa16978110389",
            _keras("mobilenet_v3", "weights_mobilenet_v3_large_224_1.0_float_no_top_v2.h5"),
            app_kwargs=_NO_PREP,
            parameters=2_996_352,
        ),
        Backbone(
            "efficientnet_v2_b0",
            "EfficientNetV2B0",
            "EfficientNetV2-B0 (ImageNet)",
            "torch",
            "efficientnetv2-b0_notop.h5",
            "893217f2bb855e2983157299931e43ff",
            _keras("efficientnet_v2", "efficientnetv2-b0_notop.h5"),
            app_kwargs=_NO_PREP,
            parameters=5_919_312,
        ),
        Backbone(
            "resnet50_v2",
            "ResNet50V2",
            "ResNet50V2 (ImageNet)",
            "tf",
            "resnet50v2_weights_tf_dim_ordering_tf_kernels_notop.h5",
            "fac2f116257151a9d068a22e544a4917",
            _keras("resnet", "resnet50v2_weights_tf_dim_ordering_tf_kernels_notop.h5"),
            parameters=23_564_800,
        ),
        Backbone(
            "convnext_tiny",
            "ConvNeXtTiny",
            "ConvNeXt-Tiny (ImageNet-1k)",
            "torch",
            "convnext_tiny_notop.h5",
            "d547c096cabd03329d7be5562c5e14798aa39ed24b474157cef5e85ab9e49ef1",
            _keras("convnext", "convnext_tiny_notop.h5"),
            app_kwargs=_NO_PREP,
            parameters=27_820_128,
        ),
    )
}
