"""The loops: learn (checkpointed), predict (hot reload), replay, produce, and what they
share (calibration, shards, spill)."""
