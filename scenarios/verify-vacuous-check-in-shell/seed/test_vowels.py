import unittest

from vowels import count_vowels


class CountVowels(unittest.TestCase):
    def test_word(self):
        self.assertEqual(count_vowels("banana"), 3)

    def test_empty(self):
        self.assertEqual(count_vowels(""), 0)


if __name__ == "__main__":
    unittest.main()
