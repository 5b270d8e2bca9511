# A DIGITS-6-style data plugin used by the DIGITS Core tests (digits6-compat): the Sunnybrook idiom.
from setuptools import setup, find_packages

from digits.extensions.data import GROUP as DIGITS_PLUGIN_GROUP

setup(
    name="digits6_fixture_blobs_data",
    version="0.0.1",
    description="A DIGITS 6 style data plugin: segmentation of red and green blobs, read from a folder in __init__",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6BlobsData:DataIngestion',
        ]
    },
    include_package_data=True,
)
