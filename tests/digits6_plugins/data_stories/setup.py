# A DIGITS-6-style data plugin used by the DIGITS Core tests (digits6-compat).
from setuptools import setup, find_packages

from digits.extensions.data import GROUP as DIGITS_PLUGIN_GROUP

setup(
    name="digits6_fixture_stories_data",
    version="0.0.1",
    description="A DIGITS 6 style data plugin in the bAbI idiom: one-sentence stories, raw float labels",
    license="BSD",
    packages=find_packages(),
    entry_points={
        DIGITS_PLUGIN_GROUP: [
            'class=digits6StoriesData:DataIngestion',
        ]
    },
    include_package_data=True,
)
