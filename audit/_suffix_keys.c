/*
 * A shard's sampled keys: the first bytes of every step-th suffix in rank order, made once per
 * process from the mapped shard (`audit._suffix.shard_keys`) and handed to the searches beside
 * it.  A binary search over them (`sampled_start` in _suffix.h) reads a few contiguous
 * megabytes, where the same steps in the suffix array cost two cache misses each (the
 * pointer, then the text it points to); what it finds is the range a full search would narrow
 * to, so every answer is the same with or without them.  The caller chooses the step, so the
 * keys of a large index stay within a memory budget.
 */
#include "_suffix.h"

/* Keys of ceil(count / step) samples after a header (the step, as int64, in KEY_BYTES bytes),
 * KEY_BYTES each: the suffix's first KEY_BYTES - 1 bytes (zeros past its end), then how many of
 * them it has. */
PyObject *shard_keys(PyObject *self, PyObject *args)
{
    PyObject *data_obj, *table_obj;
    int ratio;
    Py_ssize_t step;
    Py_buffer data, table;
    Shard shard;
    if (!PyArg_ParseTuple(args, "OOin", &data_obj, &table_obj, &ratio, &step))
        return NULL;
    if (step < 1) {
        PyErr_SetString(PyExc_ValueError, "step must be at least 1");
        return NULL;
    }
    if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0)
        return NULL;
    Py_ssize_t samples = shard.count / step + (shard.count % step != 0);
    PyObject *result = PyBytes_FromStringAndSize(NULL, (samples + 1) * KEY_BYTES);
    if (result != NULL) {
        uint8_t *keys = (uint8_t *)PyBytes_AS_STRING(result);
        int64_t recorded = step;
        Py_BEGIN_ALLOW_THREADS
        memset(keys, 0, (samples + 1) * KEY_BYTES);
        memcpy(keys, &recorded, sizeof(recorded));
        keys += KEY_BYTES;
        for (Py_ssize_t k = 0; k < samples; k++) {
            Py_ssize_t start = pointer_at(&shard, k * step), available = start < shard.size ? shard.size - start : 0;
            Py_ssize_t width = available < KEY_BYTES - 1 ? available : KEY_BYTES - 1;
            memcpy(keys + k * KEY_BYTES, shard.data + start, width);
            keys[k * KEY_BYTES + KEY_BYTES - 1] = (uint8_t)width;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&table);
    return result;
}

/* Take `obj` (None, or what `shard_keys` made of this shard) as the shard's keys; a buffer
 * whose size is not its header's step's is a ValueError.  0 or -1; view->obj is NULL when
 * there is nothing to release. */
int parse_keys(PyObject *obj, Py_buffer *view, Shard *shard)
{
    view->obj = NULL;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    int64_t step = 0;
    if (view->len >= KEY_BYTES)
        memcpy(&step, view->buf, sizeof(step));
    Py_ssize_t samples = step > 0 ? shard->count / step + (shard->count % step != 0) : 0;
    if (step < 1 || view->len != (samples + 1) * KEY_BYTES) {
        PyErr_Format(PyExc_ValueError, "keys have %zd bytes, not a header and the keys of every %lld-th of %zd suffixes",
                     view->len, (long long)step, shard->count);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    shard->keys = (const uint8_t *)view->buf + KEY_BYTES;
    shard->samples = samples;
    shard->key_step = step;
    return 0;
}
