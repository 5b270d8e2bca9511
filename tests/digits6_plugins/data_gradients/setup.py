# A DIGITS-6-style data plugin used by the DIGITS Core tests (digits6-compat).
import os
from setuptools import setup, find_packages

from digits.extensions.data import GROUP as DIGITS_PLUGIN_GROUP


def read(fname):
    return open(os.path.join(os.path.dirname(__file__), fname)).read()


setup(
    name="digits6_fixture_gradients_data",
    version="0.0.1",
    description="A DIGITS 6 style data plugin: synthetic gradient images",
    long_description=read('README'),
    license="BSD",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6GradientsData:DataIngestion',
        ]
    },
    include_package_data=True,
)
