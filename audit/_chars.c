/*
 * Character-level helpers of the n-gram signal, in C because every field asks them and most
 * fields are short, where numpy's or a regular expression's fixed cost per call outweighs the
 * work: a field cut into window units, a query's byte-level match lengths turned into
 * character lengths, the longest matches of a query in a document's own text (a page let
 * in for quoting a field, searched as text, unsorted), and a text's characters counted per
 * script.
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
 * them (a suffix of a string found is found), one byte at a time.  Given `upper` (int64 per
 * start) and `held` (a byte per start), a search stops at upper's length, and a held start is
 * answered upper's length unsearched and floors the next start's search as a found one would:
 * what the caller knows some other text holds, so each answer is at least this text's own and
 * at most the longest in this text and the others together. */
static PyObject *longest_in_text(PyObject *self, PyObject *args)
{
    Py_buffer text, query, upper = {0}, held = {0};
    if (!PyArg_ParseTuple(args, "y*y*|y*y*", &text, &query, &upper, &held))
        return NULL;
    const uint8_t *t = text.buf, *q = query.buf;
    Py_ssize_t n = query.len, count = 0;
    for (Py_ssize_t l = 0; l < n; l++)
        count += (q[l] & 0xC0) != 0x80;
    PyObject *result = NULL;
    if ((upper.obj != NULL && upper.len != count * (Py_ssize_t)sizeof(int64_t)) || (held.obj != NULL && (upper.obj == NULL || held.len != count))) {
        PyErr_SetString(PyExc_ValueError, "upper must hold one int64 per character start, held one byte per start and only with upper");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (result != NULL) {
        int64_t *found = (int64_t *)PyBytes_AS_STRING(result);
        const int64_t *tops = upper.obj != NULL ? upper.buf : NULL;
        const uint8_t *known = held.obj != NULL ? held.buf : NULL;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t previous = 0, at = 0, k = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((q[i] & 0xC0) == 0x80)
                continue;
            Py_ssize_t top = tops != NULL && tops[k] < n - i ? (Py_ssize_t)tops[k] : n - i;
            Py_ssize_t length = previous - (i - at) > 0 ? previous - (i - at) : 0;
            if ((known != NULL && known[k]) || length > top)
                length = top;
            while (length < top && find_bytes(t, text.len, q + i, length + 1) != NULL)
                length++;
            found[k++] = previous = length;
            at = i;
        }
        Py_END_ALLOW_THREADS
    }
done:
    if (held.obj != NULL)
        PyBuffer_Release(&held);
    if (upper.obj != NULL)
        PyBuffer_Release(&upper);
    PyBuffer_Release(&text);
    PyBuffer_Release(&query);
    return result;
}

/* Whether code point c falls in one of `count` sorted, disjoint [lo, hi] ranges. */
static int in_ranges(const uint32_t *ranges, Py_ssize_t count, Py_UCS4 c)
{
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (c > ranges[2 * mid + 1])
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < count && c >= ranges[2 * lo];
}

/* Whether a one-character unit is kept: not punctuation or a separator (a category starting
 * with P or Z).  Letters and numbers are neither; anything else asks `category`
 * (unicodedata's), so the answer follows Python's own Unicode tables.  -1 on error. */
static int kept_alone(PyObject *category, Py_UCS4 c)
{
    if (Py_UNICODE_ISALPHA(c) || Py_UNICODE_ISNUMERIC(c))
        return 1;
    PyObject *one = PyUnicode_FromOrdinal(c), *found = one ? PyObject_CallOneArg(category, one) : NULL;
    Py_XDECREF(one);
    if (found == NULL)
        return -1;
    int kept = -1;
    if (!PyUnicode_Check(found) || PyUnicode_GET_LENGTH(found) < 1)
        PyErr_SetString(PyExc_TypeError, "category did not return a category name");
    else
        kept = PyUnicode_READ_CHAR(found, 0) != 'P' && PyUnicode_READ_CHAR(found, 0) != 'Z';
    Py_DECREF(found);
    return kept;
}

/* Append [start, end) to the two lists unless it is one character `kept_alone` drops.  0, or
 * -1 with an exception. */
static int add_unit(PyObject *starts, PyObject *ends, PyObject *category, Py_ssize_t start, Py_ssize_t end, Py_UCS4 first)
{
    if (end - start == 1) {
        int kept = kept_alone(category, first);
        if (kept <= 0)
            return kept;
    }
    PyObject *s = PyLong_FromSsize_t(start), *e = s ? PyLong_FromSsize_t(end) : NULL;
    int failed = e == NULL || PyList_Append(starts, s) < 0 || PyList_Append(ends, e) < 0;
    Py_XDECREF(s);
    Py_XDECREF(e);
    return failed ? -1 : 0;
}

/* A text's window units as `audit.text.units` defines them: each character of an unsegmented
 * script (`ranges`) its own unit, every other run of non-space characters one unit (space as
 * str.isspace, which is what a regular expression's \s means), and a one-character unit dropped
 * when it is punctuation or a separator. */
static PyObject *unit_spans(PyObject *self, PyObject *args)
{
    PyObject *text, *category, *starts = NULL, *ends = NULL, *result = NULL;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "Uy*O", &text, &table, &category))
        return NULL;
    if (table.len % (2 * sizeof(uint32_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "ranges must be pairs of uint32");
        goto done;
    }
    const uint32_t *ranges = table.buf;
    Py_ssize_t count = table.len / (2 * sizeof(uint32_t)), n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if ((starts = PyList_New(0)) == NULL || (ends = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n;) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        Py_ssize_t start = i++;
        if (in_ranges(ranges, count, c)) {
            if (add_unit(starts, ends, category, start, i, c) < 0)
                goto done;
            continue;
        }
        if (Py_UNICODE_ISSPACE(c))
            continue;
        while (i < n) {
            Py_UCS4 next = PyUnicode_READ(kind, data, i);
            if (Py_UNICODE_ISSPACE(next) || in_ranges(ranges, count, next))
                break;
            i++;
        }
        if (add_unit(starts, ends, category, start, i, c) < 0)
            goto done;
    }
    /* Tuples: the caller keeps the answer for every later asker, who must not change it. */
    PyObject *frozen_starts = PyList_AsTuple(starts), *frozen_ends = frozen_starts ? PyList_AsTuple(ends) : NULL;
    if (frozen_ends != NULL)
        result = PyTuple_Pack(2, frozen_starts, frozen_ends);
    Py_XDECREF(frozen_starts);
    Py_XDECREF(frozen_ends);
done:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&table);
    return result;
}

/* Whether `ranges` (`count` uint32 triples (lo, hi, script)) are sorted, disjoint and each of a
 * script below `scripts` (a ValueError set when not). */
static int script_table_ok(const uint32_t *ranges, Py_ssize_t count, int scripts)
{
    for (Py_ssize_t r = 0; r < count; r++)
        if (ranges[3 * r + 2] >= (uint32_t)scripts || ranges[3 * r] > ranges[3 * r + 1] || (r > 0 && ranges[3 * r] <= ranges[3 * r - 2])) {
            PyErr_Format(PyExc_ValueError, "table range %zd is not sorted, disjoint and of a script below %d", r, scripts);
            return 0;
        }
    return 1;
}

/* Count `text`'s characters per script into found[0:scripts] and each script's first index into
 * found[scripts:2 * scripts] (set to 0 and -1 beforehand). */
static void count_scripts(PyObject *text, const uint32_t *ranges, Py_ssize_t count, int scripts, Py_ssize_t *found)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(text); i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        Py_ssize_t lo = 0, hi = count; /* the first range ending at or after c */
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (ranges[3 * mid + 1] < c)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < count && ranges[3 * lo] <= c) {
            uint32_t k = ranges[3 * lo + 2];
            if (found[k]++ == 0)
                found[scripts + k] = i;
        }
    }
}

/* Per script, how many characters of `text` are written in it and the index of the first
 * (-1: none): `table` holds uint32 triples (lo, hi, script), code point ranges sorted and
 * disjoint, each script below `scripts`.  One pass in C, since every field of every variant
 * asks its dominant script (`audit.text.dominant_script`) and a passage has thousands of
 * characters.  Returns (counts, firsts), two lists of `scripts` ints. */
static PyObject *script_counts(PyObject *self, PyObject *args)
{
    PyObject *text, *counts = NULL, *firsts = NULL, *result = NULL;
    Py_buffer table;
    int scripts;
    if (!PyArg_ParseTuple(args, "Uy*i", &text, &table, &scripts))
        return NULL;
    const uint32_t *ranges = table.buf;
    Py_ssize_t count = table.len / (Py_ssize_t)(3 * sizeof(uint32_t));
    Py_ssize_t *found = NULL;
    if (scripts <= 0 || table.len % (Py_ssize_t)(3 * sizeof(uint32_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "table must hold (lo, hi, script) uint32 triples and scripts be positive");
        goto done;
    }
    if (!script_table_ok(ranges, count, scripts))
        goto done;
    if ((found = PyMem_Malloc(2 * (size_t)scripts * sizeof(*found))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (int k = 0; k < scripts; k++)
        found[k] = 0, found[scripts + k] = -1;
    count_scripts(text, ranges, count, scripts, found);
    if ((counts = PyList_New(scripts)) == NULL || (firsts = PyList_New(scripts)) == NULL)
        goto done;
    for (int k = 0; k < scripts; k++) {
        PyObject *a = PyLong_FromSsize_t(found[k]), *b = PyLong_FromSsize_t(found[scripts + k]);
        if (a == NULL || b == NULL) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        PyList_SET_ITEM(counts, k, a);
        PyList_SET_ITEM(firsts, k, b);
    }
    result = PyTuple_Pack(2, counts, firsts);
done:
    Py_XDECREF(counts);
    Py_XDECREF(firsts);
    PyMem_Free(found);
    PyBuffer_Release(&table);
    return result;
}

static PyMethodDef methods[] = {
    {"unit_spans", unit_spans, METH_VARARGS,
     "unit_spans(text, ranges, category) -> (starts, ends): tuples of the window units' character "
     "bounds; ranges are the unsegmented scripts' [lo, hi] pairs of uint32, sorted, and category "
     "is unicodedata.category."},
    {"char_lengths", char_lengths, METH_VARARGS,
     "char_lengths(query, lengths) -> list of int: per character start of query, how many whole "
     "characters the match of lengths[k] bytes (int64, one per character start) covers."},
    {"longest_in_text", longest_in_text, METH_VARARGS,
     "longest_in_text(text, query[, upper[, held]]) -> bytes of int64: per character start of query, "
     "the longest prefix of the rest that occurs in text, at most upper's (int64 per start); a "
     "start held (a byte per start) is answered upper's length and floors the next start."},
    {"script_counts", script_counts, METH_VARARGS,
     "script_counts(text, table, scripts) -> (counts, firsts): per script, how many characters of "
     "text are in it and the index of the first (-1: none); table holds sorted, disjoint (lo, hi, "
     "script) uint32 triples."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_chars", NULL, -1, methods};

PyMODINIT_FUNC PyInit__chars(void) { return PyModule_Create(&module); }
