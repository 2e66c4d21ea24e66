"""GPU placement and benchmarking: plain logic behind the Device Assign and Benchmark nodes.

Nothing here imports ComfyUI; torch is imported inside the functions that need it.
"""
