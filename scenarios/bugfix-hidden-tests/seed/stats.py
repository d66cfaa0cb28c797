def median(values):
    """Median of a list of numbers."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
