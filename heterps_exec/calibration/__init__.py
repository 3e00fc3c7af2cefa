"""Measured layers and links, a problem calibrated from them, and predictions checked against measured runs."""
