# A DIGITS-6-style view plugin used by the DIGITS Core tests (digits6-compat).
from setuptools import setup, find_packages

from digits.extensions.view import GROUP as DIGITS_PLUGIN_GROUP

setup(
    name="digits6_fixture_segmentation_view",
    version="0.0.1",
    description="A DIGITS 6 style view plugin: C×H×W class scores drawn over the image with the dataset's palette",
    license="BSD",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6SegmentationView:Visualization',
        ]
    },
    include_package_data=True,
)
