"""mtp-remote: diagnose speculative-decoding output corruption on remote SGLang hosts.

The package runs the speculative vs non-speculative experiment on a GPU host over SSH (or locally),
measures degeneracy of every output, and gives a verdict per speculative profile with its evidence.
"""

__version__ = "0.1.0"
