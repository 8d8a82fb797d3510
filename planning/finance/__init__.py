"""Finance: owned and reserved capacity, commitment sizing, spot risk and the year's bill (docs/finance.md).

``risk`` (spot interruption rates and expected prices), ``accounting`` (costs by pricing kind, idle committed
capacity, the comparable cost), ``commitments`` (the two-stage commitment MILP and its certificate), ``brute``
(its brute-force oracle), ``bill`` (the year's bill by month, model, region, cloud and kind) and ``plan`` (the
finance solve behind ``planning.api.solve`` for scenarios with finance inputs).
"""
