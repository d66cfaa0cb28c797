import unittest
from money import Money


class MoneyTest(unittest.TestCase):
    def test_amount(self):
        self.assertEqual(Money(3, 'EUR').amount, 3)
