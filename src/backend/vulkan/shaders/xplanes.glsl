// The layout of the int4 GEMV's x planes, which gemv_xplanes.comp writes and gemv.comp (COLI_INT_DOT)
// reads: per row of x and 32-column chunk of int4 codes, kXPlanes byte planes of kXPlaneWords words each
// (kXPlaneVecs uvec4: plane p's words for code words 0 and 1 in uvec4 2p, for code words 2 and 3 in
// uvec4 2p + 1), and beside them a uvec2: 2^-k and the sum of X.
const uint kXPlaneCols = 32u;   // = gemv.cpp's kXPlaneChunkCols
const uint kXPlanes = 3u;       // X = 65536 P2 + 256 P1 + P0
const uint kXPlaneWords = 8u;   // a plane's words per chunk: a code word's even nibbles, then its odd
const uint kXPlaneVecs = kXPlanes * kXPlaneWords / 4u;
