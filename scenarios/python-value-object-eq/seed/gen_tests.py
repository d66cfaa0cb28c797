import pathlib

CASES = [(1, 'EUR', 1, 'EUR', True), (1, 'EUR', 2, 'EUR', False), (1, 'EUR', 1, 'USD', False)]

lines = ['import unittest', 'from money import Money', '', '', 'class GeneratedTest(unittest.TestCase):']
for i, (a, ca, b, cb, same) in enumerate(CASES):
    lines.append(f'    def test_case_{i}(self):')
    lines.append(f'        self.assertEqual(Money({a}, {ca!r}) == Money({b}, {cb!r}), {same})')
pathlib.Path('test_generated.py').write_text('\n'.join(lines) + '\n')
