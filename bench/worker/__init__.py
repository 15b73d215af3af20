"""The child process: trains one scenario and writes one JSON result. Started by bench.run.runner."""
