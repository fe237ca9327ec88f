/*
 * Character-level helpers of the n-gram signal's searches, in C because every field asks them
 * and most fields are short, where numpy's fixed cost per call outweighs the work: a query's
 * byte-level match lengths turned into character lengths, and the longest matches of a query
 * in a document's own text (a page let in for quoting a field, searched as text, unsorted).
 * Character starts are every byte but a UTF-8 continuation byte (10xxxxxx), as
 * `audit.corpora.shardread.char_starts` has them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Per character start of the query, how many whole characters the byte-level match starting
 * there (`lengths`, int64, one per character start) covers: the character starts (and the
 * query's end) at most that many bytes on, less one, found by a binary search each. */
static PyObject *char_lengths(PyObject *self, PyObject *args)
{
    Py_buffer query, lengths;
    if (!PyArg_ParseTuple(args, "y*y*", &query, &lengths))
        return NULL;
    const uint8_t *q = query.buf;
    Py_ssize_t n = query.len, count = 0;
    Py_ssize_t *bounds = PyMem_Calloc(n + 1, sizeof(*bounds));
    PyObject *result = NULL;
    if (bounds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t l = 0; l < n; l++)
        if ((q[l] & 0xC0) != 0x80)
            bounds[count++] = l;
    bounds[count] = n;
    if (lengths.len != count * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "lengths has %zd bytes, expected one int64 per character start (%zd)", lengths.len, count);
        goto done;
    }
    const int64_t *bytes = lengths.buf;
    if ((result = PyList_New(count)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t end = bounds[k] + bytes[k];
        Py_ssize_t lo = 0, hi = count + 1; /* the first bound past `end` */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (bounds[mid] <= end)
                lo = mid + 1;
            else
                hi = mid;
        }
        PyObject *value = PyLong_FromSsize_t(lo - 1 - k);
        if (value == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, value);
    }
done:
    PyMem_Free(bounds);
    PyBuffer_Release(&query);
    PyBuffer_Release(&lengths);
    return result;
}

/* Where `needle` (m > 0 bytes) first occurs in `hay`, or NULL: glibc's and the BSDs' memmem
 * where there is one, else a plain scan. */
static const uint8_t *find_bytes(const uint8_t *hay, Py_ssize_t n, const uint8_t *needle, Py_ssize_t m)
{
#if defined(__GLIBC__) || defined(__APPLE__) || defined(__FreeBSD__)
    return memmem(hay, (size_t)n, needle, (size_t)m);
#else
    for (Py_ssize_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, (size_t)m) == 0)
            return hay + i;
    return NULL;
#endif
}

/* At each character start of the query, the longest prefix of the rest found in `text` (a
 * document's own bytes, not sorted): from the previous start's length less the bytes between
 * them (a suffix of a string found is found), one byte at a time. */
static PyObject *longest_in_text(PyObject *self, PyObject *args)
{
    Py_buffer text, query;
    if (!PyArg_ParseTuple(args, "y*y*", &text, &query))
        return NULL;
    const uint8_t *t = text.buf, *q = query.buf;
    Py_ssize_t n = query.len, count = 0;
    for (Py_ssize_t l = 0; l < n; l++)
        count += (q[l] & 0xC0) != 0x80;
    PyObject *result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (result != NULL) {
        int64_t *found = (int64_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t previous = 0, at = 0, k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((q[i] & 0xC0) == 0x80)
                continue;
            Py_ssize_t length = previous - (i - at) > 0 ? previous - (i - at) : 0;
            while (i + length < n && find_bytes(t, text.len, q + i, length + 1) != NULL)
                length++;
            found[k++] = previous = length;
            at = i;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&text);
    PyBuffer_Release(&query);
    return result;
}

static PyMethodDef methods[] = {
    {"char_lengths", char_lengths, METH_VARARGS,
     "char_lengths(query, lengths) -> list of int: per character start of query, how many whole "
     "characters the match of lengths[k] bytes (int64, one per character start) covers."},
    {"longest_in_text", longest_in_text, METH_VARARGS,
     "longest_in_text(text, query) -> bytes of int64: per character start of query, the longest "
     "prefix of the rest that occurs in text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chars", NULL, -1, methods};

PyMODINIT_FUNC PyInit__chars(void) { return PyModule_Create(&module); }
