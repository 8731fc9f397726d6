"""Audio in: listing inputs, decoding to 16 kHz mono, log-mel segments. Pure functions, no Ray."""
