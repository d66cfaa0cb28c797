def count_vowels(text):
    """Return the number of vowels (a, e, i, o, u, either case) in text."""
    raise NotImplementedError
