def mean(values):
    """The arithmetic mean of a non-empty list."""
    return sum(values) / len(values)
