import unittest

from text import count_consonants, count_vowels


class Counts(unittest.TestCase):
    def test_vowels(self):
        self.assertEqual(count_vowels("banana"), 3)

    def test_consonants(self):
        self.assertEqual(count_consonants("banana"), 3)
        self.assertEqual(count_consonants("Rhythm!"), 6)


if __name__ == "__main__":
    unittest.main()
