"""The ONLY place with I/O: wire messages, sources, sinks, decoding, replay, the demo."""
