raise RuntimeError("boom at import of the sample plugin")
