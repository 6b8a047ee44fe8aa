"""Run execution: scheduler of kinds, node bodies, workers, projector and services."""
