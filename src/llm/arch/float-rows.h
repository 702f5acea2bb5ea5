/*
 * float-rows.h - the table entries every ISA builds the same way from its float dots.
 *
 * Included by scalar.c and each ISA file after they define
 *   float dot_f32(const float *, const float *, int)        ggml_vec_dot order (one token)
 *   float dot_f16(const lc_fp16 *, const lc_fp16 *, int)
 *   float tiny_dot_f32(...), tiny_dot_f16(...)             tinyBLAS order (batches)
 * and gives vec_dot_f32/f16 (the vec_dot entries) and gemm_f32/f16 (the gemm entries, one
 * tinyBLAS-ordered dot per output: see kernels.h for the numeric contract).
 */
#ifndef LC_FLOAT_ROWS_H
#define LC_FLOAT_ROWS_H

static void vec_dot_f32(int n, float *s, const void *x, const void *y)
{
    *s = dot_f32(x, y, n);
}

static void vec_dot_f16(int n, float *s, const void *x, const void *y)
{
    *s = dot_f16(x, y, n);
}

static void gemm_f32(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                     const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ld_s + (size_t)r] =
                tiny_dot_f32((const float *)((const char *)w + (size_t)r * w_stride),
                             (const float *)((const char *)a + (size_t)c * a_stride), n);
}

static void gemm_f16(int n, float *s, size_t ld_s, const void *w, size_t w_stride, int nr,
                     const void *a, size_t a_stride, int nc)
{
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < nr; r++)
            s[(size_t)c * ld_s + (size_t)r] =
                tiny_dot_f16((const lc_fp16 *)((const char *)w + (size_t)r * w_stride),
                             (const lc_fp16 *)((const char *)a + (size_t)c * a_stride), n);
}

#endif
