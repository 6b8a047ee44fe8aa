"""Parking: what a parked run's checkpoint records, when it wakes, and which resume may run it."""
