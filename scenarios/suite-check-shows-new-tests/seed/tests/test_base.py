import unittest
from units import to_base


class Base(unittest.TestCase):
    def test_feet(self):
        self.assertAlmostEqual(to_base(10, 'ft'), 3.048)


if __name__ == '__main__':
    unittest.main()
