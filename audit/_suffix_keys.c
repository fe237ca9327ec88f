/*
 * A shard's sampled keys: the first bytes of every KEY_STEP-th suffix in rank order, made once
 * per process from the mapped shard (`audit._suffix.shard_keys`) and handed to the searches
 * beside it.  A binary search over them (`sampled_start` in _suffix.h) reads a few contiguous
 * kilobytes, where the same steps in the suffix array cost two cache misses each (the
 * pointer, then the text it points to); what it finds is the range a full search would narrow
 * to, so every answer is the same with or without them.
 */
#include "_suffix.h"

/* Keys of ceil(count / KEY_STEP) samples, KEY_BYTES each: the suffix's first KEY_BYTES - 1
 * bytes (zeros past its end), then how many of them it has. */
PyObject *shard_keys(PyObject *self, PyObject *args)
{
    PyObject *data_obj, *table_obj;
    int ratio;
    Py_buffer data, table;
    Shard shard;
    if (!PyArg_ParseTuple(args, "OOi", &data_obj, &table_obj, &ratio))
        return NULL;
    if (parse_shard(data_obj, table_obj, ratio, &data, &table, &shard) < 0)
        return NULL;
    Py_ssize_t samples = (shard.count + KEY_STEP - 1) / KEY_STEP;
    PyObject *result = PyBytes_FromStringAndSize(NULL, samples * KEY_BYTES);
    if (result != NULL) {
        uint8_t *keys = (uint8_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        memset(keys, 0, samples * KEY_BYTES);
        for (Py_ssize_t k = 0; k < samples; k++) {
            Py_ssize_t start = pointer_at(&shard, k * KEY_STEP), available = start < shard.size ? shard.size - start : 0;
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

/* Take `obj` (None, or what `shard_keys` made of this shard) as the shard's keys; a buffer of
 * the wrong size is a ValueError.  0 or -1; view->obj is NULL when there is nothing to release. */
int parse_keys(PyObject *obj, Py_buffer *view, Shard *shard)
{
    view->obj = NULL;
    if (obj == NULL || obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    Py_ssize_t samples = (shard->count + KEY_STEP - 1) / KEY_STEP;
    if (view->len != samples * KEY_BYTES) {
        PyErr_Format(PyExc_ValueError, "keys have %zd bytes, expected %zd (%zd samples of %d)", view->len, samples * KEY_BYTES, samples, KEY_BYTES);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    shard->keys = view->buf;
    shard->samples = samples;
    return 0;
}
