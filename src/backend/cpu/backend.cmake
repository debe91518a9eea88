# The CPU backend: always built, as part of coli_backend (every other backend falls back to it).
coli_backend_add(cpu LIBRARY coli_backend)
