"""The network pieces every model family shares: patching, positions, attention, blocks, masking."""
