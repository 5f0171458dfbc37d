"""Layers shared by every model family: linear layers that load fused checkpoints, norms, rotary
embeddings, MLPs and the paged attention layer."""
