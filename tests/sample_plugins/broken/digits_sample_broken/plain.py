class NotAPlugin:
    """Looks like a plugin, is not a DataIngestion subclass."""

    plugin_id = "not-a-subclass"
