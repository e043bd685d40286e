"""Code generators: llvm (llvmlite), c (C source + system compiler)."""
