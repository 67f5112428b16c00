"""Decisions made from records (compare, repeats, cost, exports): reads records, never the engine."""
