import unittest

from rates import fetch_rates


class TestRates(unittest.TestCase):
    def test_euro_is_the_base(self):
        self.assertEqual(fetch_rates()["EUR"], 1.0)


if __name__ == "__main__":
    unittest.main()
