def shout(s):
    """Shout.

    >>> shout('hi')
    'HI!'
    """
    return s.upper() + '!'
