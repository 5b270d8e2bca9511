# A second DIGITS-6-style data plugin (its entry point is named `class` too).
from setuptools import setup, find_packages

from digits.extensions.data import GROUP as DIGITS_PLUGIN_GROUP

setup(
    name="digits6_fixture_stripes_data",
    version="0.0.2",
    description="A DIGITS 6 style data plugin: RGB stripes, two classes",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6StripesData:DataIngestion',
        ]
    },
    include_package_data=True,
)
