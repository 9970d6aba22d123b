"""Records in and out: wire messages, decoding and per-record limits, sources, sinks,
and the URIs that name them."""
