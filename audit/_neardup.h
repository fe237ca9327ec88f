/*
 * What the files of the `audit._neardup` extension share: the token kinds, a text as its code
 * points with the per-code-point tables it is cut with, the hash finaliser, and the functions
 * one file defines for another.  The module's method table is in _neardup.c.
 */
#ifndef AUDIT_NEARDUP_H
#define AUDIT_NEARDUP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Token kinds, as audit.neardup.tokens learns them per code point. */
#define SEPARATOR 0
#define WORD 1
#define CHARACTER 2
#define UNSEEN 255
#define CODE_POINTS 0x110000
#define POWERS 64

static inline uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

/* MurmurHash3's 32-bit finaliser, which datasketch's affine32 scheme applies before permuting. */
static inline uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6BU;
    h ^= h >> 13;
    h *= 0xC2B2AE35U;
    return h ^ (h >> 16);
}

/* The key of the shingle of k tokens starting at token i (or of none, when `ok` is 0): the token
 * hashes combined as h * MIX + next, xor k, through fmix64. */
static inline uint64_t shingle_key(const uint64_t *hash, Py_ssize_t i, int64_t k, int ok)
{
    uint64_t combined = 0;
    if (ok) {
        combined = hash[i];
        for (int64_t step = 1; step < k; step++)
            combined = combined * 0x9E3779B97F4A7C15ULL + hash[i + step];
        combined ^= (uint64_t)k;
    }
    return fmix64(combined);
}

typedef struct {
    const uint32_t *points;
    Py_ssize_t n;
    const uint8_t *kind;
    const uint32_t *fold;
    const uint8_t *script;
    const uint64_t *powers;
} Text;

/* _neardup.c */
PyObject *int64_bytes(Py_ssize_t count, int64_t **data);
Py_ssize_t cut_tokens(const Text *t, int64_t *starts, int64_t *ends, uint64_t *hashes, uint8_t *scripts);
PyObject *fold_text(PyObject *text, const uint8_t *kinds, const uint32_t *folds);
PyObject *shingle_text(PyObject *fold, const int64_t *starts, const int64_t *ends, Py_ssize_t first, Py_ssize_t n);

/* _neardup_bands.c */
uint64_t *radix_sort(uint64_t *a, uint64_t *tmp, Py_ssize_t n);
PyObject *collisions(PyObject *self, PyObject *args);

/* _neardup_agreement.c */
PyObject *agreement(PyObject *self, PyObject *args);

/* _neardup_field.c */
PyObject *field_shingles(PyObject *self, PyObject *args);

/* _neardup_regions.c */
PyObject *region_shingles(PyObject *self, PyObject *args);

#endif
