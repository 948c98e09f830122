"""Benchmarks of debatekit: `python -m benchmarks NAME [--flags]` writes `benchmarks/results/NAME.json`.

Each benchmark measures debatekit and its baseline in the same process and run, and reports
ratios with a description of the machine. Nothing here is a test: targets are reported, never
asserted (see tests/ for the reliability checks).
"""
