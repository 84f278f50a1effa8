"""Code generators: loop IR to native code (LLVM is the only backend)."""
