import sys
sys.path.insert(0, '.')
import calc

assert calc.add(2, 3) == 5, calc.add(2, 3)
assert calc.add(0, 0) == 0
print('all checks passed')
