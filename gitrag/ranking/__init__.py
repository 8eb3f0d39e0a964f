"""Ranking after fusion: stages that reorder, merge or group ranked chunks."""
