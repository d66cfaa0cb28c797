def to_roman(n):
    """Return n (1 to 3999) as a Roman numeral."""
    raise NotImplementedError
