def avg(a, b):
    """The average of two integers, rounded down.

    >>> avg(2, 4)
    3
    >>> avg(2, 5)
    3
    """
    return (a + b + 1) // 2
