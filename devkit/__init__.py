"""Running graymq's parts locally for the test suite and the benchmarks: free ports, a throwaway
PostgreSQL from the machine's server binaries, and ``graymq`` subprocesses with their ready line."""
