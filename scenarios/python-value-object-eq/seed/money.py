class Money:
    def __init__(self, amount, currency):
        self.amount = amount
        self.currency = currency
