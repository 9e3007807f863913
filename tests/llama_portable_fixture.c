/* What a native build of llama.cpp's CPU backend holds on a machine that
 * reports AVX-512 and AMX (this project's do): an AVX-512 kernel and an AMX
 * tile kernel. Compiled with -mavx512f -mamx-tile and never run; it proves
 * that tests/llama_portable_test.py sees such instructions. */
#include <immintrin.h>

void fixture_avx512_add(float* out, const float* a, const float* b) {
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
}

void fixture_amx_copy(const void* config, const void* tile, void* out) {
  _tile_loadconfig(config);
  _tile_loadd(0, tile, 64);
  _tile_stored(0, out, 64);
  _tile_release();
}
