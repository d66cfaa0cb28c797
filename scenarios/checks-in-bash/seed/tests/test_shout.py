import unittest
from strutil import shout


class Shout(unittest.TestCase):
    def test_shout(self):
        self.assertEqual(shout('hi'), 'HI!')


if __name__ == '__main__':
    unittest.main()
