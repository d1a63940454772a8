"""What a device without dsprof runs: standard-library modules (Python 3.6 or later) that export bundles carry
verbatim beside their runner (`dsprof.edge.export`), and that dsprof itself imports from here, so that a device and
dsprof time, read the machine and open runtimes with the same code.

- `timing_loop`: the one timing loop (warm-up, interleaved rounds, adaptive stopping) and the median's interval;
- `hardware`: the one reading of the machine (CPU and Jetson facts, the environment record);
- `cpu_share`: the CPU share a timed group got;
- `sessions`: how ONNX Runtime, OpenVINO and TFLite are opened (functions given the runtime's module).

Nothing here imports dsprof, PyTorch or NumPy.
"""
