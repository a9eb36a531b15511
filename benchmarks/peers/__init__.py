"""Other servers measured the way Conveyor is (``python -m benchmarks.peers.run_mlserver``)."""
