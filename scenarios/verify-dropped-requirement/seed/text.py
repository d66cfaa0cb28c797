def count_vowels(text):
    """Return the number of vowels (a, e, i, o, u, either case) in text."""
    raise NotImplementedError


def count_consonants(text):
    """Return the number of ASCII letters in text that are not vowels."""
    raise NotImplementedError
