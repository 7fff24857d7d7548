"""Coordinator and worker: live membership with signed heartbeats and soft-affinity placement."""
