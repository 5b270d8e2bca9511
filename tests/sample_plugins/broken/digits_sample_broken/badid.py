from digits_sample_basic import NumbersIngestion


class BadId(NumbersIngestion):
    plugin_id = "Bad Id!"
