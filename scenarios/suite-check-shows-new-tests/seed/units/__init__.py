from ._table import FACTORS


def to_base(value, unit):
    return value * FACTORS[unit]
