import unittest

from vowels import count_vowels


class Hidden(unittest.TestCase):
    def test_cases(self):
        self.assertEqual(count_vowels("AEIOU"), 5)
        self.assertEqual(count_vowels("rhythm"), 0)
        self.assertEqual(count_vowels("Hello, World!"), 3)
        self.assertEqual(count_vowels(""), 0)


if __name__ == "__main__":
    unittest.main()
