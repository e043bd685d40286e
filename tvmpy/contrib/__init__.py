"""Optional add-ons around the compiler: hand-written kernels and the glue that links them."""
