# A DIGITS-6-style view plugin used by the DIGITS Core tests (digits6-compat).
import os
from setuptools import setup, find_packages

from digits.extensions.view import GROUP as DIGITS_PLUGIN_GROUP


def read(fname):
    return open(os.path.join(os.path.dirname(__file__), fname)).read()


setup(
    name="digits6_fixture_gradients_view",
    version="0.0.1",
    description="A DIGITS 6 style view plugin: gradient arrows",
    long_description=read('README'),
    license="BSD",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6GradientsView:Visualization',
        ]
    },
    include_package_data=True,
)
