import unittest

from cal import is_leap


class Leap(unittest.TestCase):
    def test_plain_leap(self):
        self.assertTrue(is_leap(2024))

    def test_plain_common(self):
        self.assertFalse(is_leap(2023))
