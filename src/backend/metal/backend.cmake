# The Metal backend: a known name, not written yet (its entry says so).
coli_backend_add(metal)
