import unittest

from stats import median


class Hidden(unittest.TestCase):
    def test_even(self):
        self.assertEqual(median([1, 2, 3, 4]), 2.5)
        self.assertEqual(median([10, 0]), 5)

    def test_odd_unsorted(self):
        self.assertEqual(median([9, 1, 5]), 5)

    def test_empty(self):
        with self.assertRaises(ValueError):
            median([])


if __name__ == "__main__":
    unittest.main()
