"""The cross-encoder support judge: training (train.py) and evaluation (evaluate.py)."""
