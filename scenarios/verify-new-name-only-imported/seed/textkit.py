def shout(s):
    """Upper-case."""
    return s.upper()
