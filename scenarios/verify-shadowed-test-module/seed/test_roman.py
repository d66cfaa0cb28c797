import unittest

from roman import to_roman


class ToRoman(unittest.TestCase):
    def test_small(self):
        self.assertEqual(to_roman(4), "IV")

    def test_large(self):
        self.assertEqual(to_roman(3999), "MMMCMXCIX")


if __name__ == "__main__":
    unittest.main()
