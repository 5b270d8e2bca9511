from digits_sample_basic import NumbersIngestion


class DuplicateNumbers(NumbersIngestion):
    """Reuses the id "sample-numbers" of another distribution."""
