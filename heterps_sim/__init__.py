"""heterps_sim"""
