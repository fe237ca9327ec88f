/*
 * The documents of suffix-array ranks (`audit._suffix`): a directory narrowing a pointer's
 * lookup, whether a range reaches an allowed document, and a field's spread sample.
 */
#include "_suffix.h"

/* The directory's block size, 2^shift bytes: about as many blocks as documents, so the
 * directory is no larger than the offsets. */
static int directory_shift(Py_ssize_t size, Py_ssize_t documents)
{
    int shift = 0;
    while (shift < 48 && (size >> shift) > documents)
        shift++;
    return shift;
}

/* For a shard of `size` bytes and its documents' offsets: int64 [shift, e_0, ..., e_blocks],
 * e_j the last document whose offset is at most j * 2^shift (-1: none), blocks = size >> shift
 * plus one.  A pointer in block j is then in a document from e_j to e_{j+1}. */
PyObject *document_directory(PyObject *self, PyObject *args)
{
    Py_buffer offsets;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*n", &offsets, &size))
        return NULL;
    Py_ssize_t documents = offsets.len / (Py_ssize_t)sizeof(int64_t);
    if (offsets.len % (Py_ssize_t)sizeof(int64_t) || documents == 0 || size < 0) {
        PyBuffer_Release(&offsets);
        PyErr_SetString(PyExc_ValueError, "document_directory: offsets must be int64 and not empty, size not negative");
        return NULL;
    }
    int shift = directory_shift(size, documents);
    Py_ssize_t blocks = (size >> shift) + 1;
    PyObject *result = PyBytes_FromStringAndSize(NULL, (blocks + 2) * (Py_ssize_t)sizeof(int64_t));
    if (result != NULL) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
        const int64_t *at = offsets.buf;
        Py_ssize_t document = -1;
        out[0] = shift;
        for (Py_ssize_t j = 0; j <= blocks; j++) {
            int64_t start = (int64_t)j << shift;
            while (document + 1 < documents && at[document + 1] <= start)
                document++;
            out[j + 1] = document;
        }
    }
    PyBuffer_Release(&offsets);
    return result;
}

/* Read a `document_directory` into `d` (None: none); -1 with an exception when it does not
 * fit a shard of `size` bytes and `d->documents` documents. */
int parse_directory(PyObject *obj, Py_ssize_t size, Py_buffer *view, Documents *d)
{
    d->directory = NULL;
    if (obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    const int64_t *words = view->buf;
    int shift = directory_shift(size, d->documents);
    Py_ssize_t blocks = (size >> shift) + 1;
    if (view->len != (blocks + 2) * (Py_ssize_t)sizeof(int64_t) || words[0] != shift) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "the document directory is not this shard's");
        return -1;
    }
    d->directory = words + 1;
    d->shift = shift;
    d->blocks = blocks;
    return 1;
}

/* Per block of a `document_directory`, the verdict `allowed_at` reads (1, 0 or MIXED) for a
 * mask of `allowed` bytes, one per document: the documents a pointer in block j can be in are
 * those `document_of` searches, e_j to e_{j+1} (from 0 where e_j is -1, a block before the first
 * document starts: MIXED, since the lookup's answer there may be the last document). */
PyObject *block_verdicts(PyObject *self, PyObject *args)
{
    Py_buffer allowed, view;
    PyObject *directory, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*O", &allowed, &directory))
        return NULL;
    Py_ssize_t documents = allowed.len;
    if (documents == 0 || PyObject_GetBuffer(directory, &view, PyBUF_SIMPLE) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "block_verdicts: one allowed byte per document, at least one document");
        PyBuffer_Release(&allowed);
        return NULL;
    }
    const int64_t *words = view.buf, *e = words + 1;
    const uint8_t *mask = allowed.buf;
    Py_ssize_t blocks = view.len / (Py_ssize_t)sizeof(int64_t) - 2;
    int fits = view.len % (Py_ssize_t)sizeof(int64_t) == 0 && blocks >= 1 && words[0] >= 0 && words[0] <= 48;
    for (Py_ssize_t j = 0; fits && j <= blocks; j++)
        fits = e[j] >= -1 && e[j] < documents && (j == 0 || e[j] >= e[j - 1]);
    if (!fits)
        PyErr_SetString(PyExc_ValueError, "block_verdicts: not a document directory of these documents");
    else if ((result = PyBytes_FromStringAndSize(NULL, blocks)) != NULL) {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
        for (Py_ssize_t j = 0; j < blocks; j++) {
            Py_ssize_t first = e[j] > 0 ? e[j] : 0, last = e[j + 1] > 0 ? e[j + 1] : 0;
            uint8_t verdict = e[j] < 0 ? MIXED : mask[first] != 0;
            for (Py_ssize_t k = first + 1; verdict != MIXED && k <= last; k++)
                if ((mask[k] != 0) != verdict)
                    verdict = MIXED;
            out[j] = verdict;
        }
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&allowed);
    return result;
}

/* Read `block_verdicts` for `d`'s directory into *verdicts (None: none, NULL); 1 when a buffer
 * is held in `view`, 0 when not, -1 with an exception when they are not that directory's. */
int parse_verdicts(PyObject *obj, const Documents *d, Py_buffer *view, const uint8_t **verdicts)
{
    *verdicts = NULL;
    if (obj == Py_None)
        return 0;
    if (d->directory == NULL) {
        PyErr_SetString(PyExc_ValueError, "block verdicts need the document directory they were made with");
        return -1;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len != d->blocks) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "the block verdicts are not this directory's");
        return -1;
    }
    *verdicts = view->buf;
    return 1;
}

/* The k-th of `picks` ranks spread evenly over [lo, hi), exactly as numpy's
 * `linspace(lo, hi - 1, picks).round()` picks it (a product and a sum, each rounded, the last
 * rank hi - 1, halves to even), so sampled answers are the same as numpy's. */
static inline Py_ssize_t spread_rank(Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t picks, Py_ssize_t k)
{
    double first = (double)lo, step = picks > 1 ? ((double)(hi - 1) - first) / (double)(picks - 1) : 0.0;
    volatile double scaled = (double)k * step; /* rounded before the sum, as numpy does */
    return k == picks - 1 && picks > 1 ? hi - 1 : (Py_ssize_t)nearbyint(scaled + first);
}

/* The first rank read of [lo, hi) that points into a document `allowed` marks
 * (`audit.corpora.inlanguage`), or -1: every rank read, in order, when the range holds at most
 * `most`, else `most` ranks `spread_rank` picks.  `verdicts` (or NULL) as `allowed_at` reads them. */
Py_ssize_t allowed_rank_in(const uint8_t *table, int ratio, const Documents *d, const uint8_t *allowed, const uint8_t *verdicts,
                           Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t most)
{
    Py_ssize_t picks = hi - lo <= most ? hi - lo : most;
    Shard s = {NULL, 0, table, 0, ratio};
    for (Py_ssize_t k = 0; k < picks; k++) {
        Py_ssize_t rank = hi - lo > most ? spread_rank(lo, hi, picks, k) : lo + k;
        if (allowed_at(d, allowed, verdicts, (int64_t)pointer_at(&s, rank)))
            return rank;
    }
    return -1;
}

PyObject *any_allowed(PyObject *self, PyObject *args)
{
    Py_buffer table, offsets, allowed, view, verdict_view;
    PyObject *directory = Py_None, *verdicts_obj = Py_None;
    const uint8_t *verdicts = NULL;
    int ratio;
    Py_ssize_t lo, hi, most;
    if (!PyArg_ParseTuple(args, "y*iy*y*nnn|OO", &table, &ratio, &offsets, &allowed, &lo, &hi, &most, &directory, &verdicts_obj))
        return NULL;
    Documents d = {offsets.buf, offsets.len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    int found = 0, bad = 0, held = 0, judged = 0;
    if (ratio < 1 || ratio > 8 || table.len % ratio || offsets.len % (Py_ssize_t)sizeof(int64_t) || allowed.len != d.documents ||
        d.documents == 0 || lo < 0 || hi > table.len / ratio || most < 1)
        bad = 1;
    else if ((held = parse_directory(directory, table.len / ratio, &view, &d)) < 0 ||
             (judged = parse_verdicts(verdicts_obj, &d, &verdict_view, &verdicts)) < 0)
        bad = 2;
    else if (lo < hi) {
        Py_BEGIN_ALLOW_THREADS
        found = allowed_rank_in(table.buf, ratio, &d, allowed.buf, verdicts, lo, hi, most) >= 0;
        Py_END_ALLOW_THREADS
    }
    if (judged > 0)
        PyBuffer_Release(&verdict_view);
    if (held > 0)
        PyBuffer_Release(&view);
    PyBuffer_Release(&table);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&allowed);
    if (bad == 1)
        PyErr_SetString(PyExc_ValueError, "any_allowed: ratio, table, offsets, mask or ranks out of range");
    if (bad)
        return NULL;
    return PyBool_FromLong(found);
}

/* The documents and in-document byte offsets of `count` ranks `spread_rank` picks over [lo, hi)
 * (each distinct rank once, in rank order): a field's sample of where a text occurs, asked of
 * every field, so one call per shard instead of numpy's several on a few hundred ranks. */
PyObject *sample_ranks(PyObject *self, PyObject *args)
{
    Py_buffer table, offsets;
    int ratio;
    Py_ssize_t lo, hi, count;
    if (!PyArg_ParseTuple(args, "y*iy*nnn", &table, &ratio, &offsets, &lo, &hi, &count))
        return NULL;
    Documents d = {offsets.buf, offsets.len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    PyObject *documents = NULL, *within = NULL, *result = NULL;
    if (ratio < 1 || ratio > 8 || table.len % ratio || offsets.len % (Py_ssize_t)sizeof(int64_t) || d.documents == 0 || lo < 0 ||
        hi > table.len / ratio || lo >= hi || count < 1) {
        PyErr_SetString(PyExc_ValueError, "sample_ranks: ratio, table, offsets, ranks or count out of range");
        goto done;
    }
    if ((documents = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t))) == NULL ||
        (within = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t))) == NULL)
        goto done;
    int64_t *doc = (int64_t *)PyBytes_AS_STRING(documents), *off = (int64_t *)PyBytes_AS_STRING(within);
    Shard s = {NULL, 0, table.buf, 0, ratio};
    Py_ssize_t kept = 0, previous = -1;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t rank = spread_rank(lo, hi, count, k);
        if (rank == previous)
            continue;
        int64_t pointer = (int64_t)pointer_at(&s, rank);
        Py_ssize_t document = document_of(&d, pointer);
        doc[kept] = document;
        off[kept++] = pointer - d.offsets[document] - 1;
        previous = rank;
    }
    if (_PyBytes_Resize(&documents, kept * (Py_ssize_t)sizeof(int64_t)) == 0 && _PyBytes_Resize(&within, kept * (Py_ssize_t)sizeof(int64_t)) == 0)
        result = PyTuple_Pack(2, documents, within);
done:
    Py_XDECREF(documents);
    Py_XDECREF(within);
    PyBuffer_Release(&table);
    PyBuffer_Release(&offsets);
    return result;
}
