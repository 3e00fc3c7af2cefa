"""heterps_exec"""
