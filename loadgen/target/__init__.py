"""The edge to the server outside the hot path: auth header, secret scrubbing, error reasons, URL roots, probe and /tokenize."""
