"""Measured layers and links, a problem calibrated from them, and predictions checked against
measured runs: prediction.py puts what heterps predicted for a run beside what it measured."""
