"""Tools for tests, benchmarks and demos (a local broker); not used by the services."""
