"""Other servers measured the way Conveyor is (``python -m benchmarks.peers.run_mlserver``;
``python -m benchmarks.peers.run_all`` for MLServer and KServe's ModelServer in one run)."""
