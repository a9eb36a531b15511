"""Conveyor: a KServe V2 inference server and in-process engine."""
