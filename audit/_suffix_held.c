/*
 * The shard tuples of the language-restricted search read, and the character starts whose
 * restricted match the unrestricted search already settles (`audit._suffix`).
 */
#include "_suffix.h"

void release_restricted(Restricted *shards, Py_ssize_t count)
{
    for (Py_ssize_t k = 0; k < count; k++)
        for (int v = 0; v < shards[k].held; v++)
            PyBuffer_Release(&shards[k].views[v]);
    PyMem_Free(shards);
}

/* Read one (data, table, ratio, offsets, allowed[, directory, lengths, ranks, verdicts]) tuple
 * into `s`; the optional parts may be None, and verdicts need the directory. */
static int parse_restricted(PyObject *item, Restricted *s)
{
    PyObject *data_obj, *table_obj, *offsets_obj, *allowed_obj, *directory = Py_None, *lengths = Py_None, *ranks = Py_None, *verdicts = Py_None;
    int ratio;
    s->held = 0;
    s->lengths = s->ranks = NULL;
    if (!PyArg_ParseTuple(item, "OOiOO|OOOO", &data_obj, &table_obj, &ratio, &offsets_obj, &allowed_obj, &directory, &lengths, &ranks, &verdicts))
        return -1;
    if (parse_shard(data_obj, table_obj, ratio, &s->views[0], &s->views[1], &s->shard) < 0)
        return -1;
    s->held = 2;
    if (PyObject_GetBuffer(offsets_obj, &s->views[2], PyBUF_SIMPLE) < 0)
        return -1;
    s->held = 3;
    if (PyObject_GetBuffer(allowed_obj, &s->views[3], PyBUF_SIMPLE) < 0)
        return -1;
    s->held = 4;
    s->documents = (Documents){s->views[2].buf, s->views[2].len / (Py_ssize_t)sizeof(int64_t), NULL, 0, 0};
    s->allowed = s->views[3].buf;
    if (s->views[2].len % (Py_ssize_t)sizeof(int64_t) || s->documents.documents == 0 || s->views[3].len != s->documents.documents) {
        PyErr_SetString(PyExc_ValueError, "offsets must be int64, one allowed byte per document");
        return -1;
    }
    int got = parse_directory(directory, s->shard.size, &s->views[s->held], &s->documents);
    if (got < 0)
        return -1;
    s->held += got;
    if ((got = parse_verdicts(verdicts, &s->documents, &s->views[s->held], &s->verdicts)) < 0)
        return -1;
    s->held += got;
    if ((lengths == Py_None) != (ranks == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "a shard's lengths and ranks go together");
        return -1;
    }
    if (lengths == Py_None)
        return 0;
    if (PyObject_GetBuffer(lengths, &s->views[s->held], PyBUF_SIMPLE) < 0)
        return -1;
    s->lengths = s->views[s->held++].buf;
    if (PyObject_GetBuffer(ranks, &s->views[s->held], PyBUF_SIMPLE) < 0)
        return -1;
    s->ranks = s->views[s->held++].buf;
    return 0;
}

/* Whether each shard's own answers (if given) hold one length and one rank per character
 * start, every rank of a match inside its shard. */
int answers_fit(const Restricted *shards, Py_ssize_t count, Py_ssize_t starts)
{
    for (Py_ssize_t k = 0; k < count; k++) {
        const Restricted *s = &shards[k];
        if (s->lengths == NULL)
            continue;
        const Py_buffer *lengths = &s->views[s->held - 2], *ranks = &s->views[s->held - 1];
        if (lengths->len != starts * (Py_ssize_t)sizeof(int64_t) || ranks->len != lengths->len)
            return 0;
        for (Py_ssize_t j = 0; j < starts; j++)
            if (s->lengths[j] > 0 && (s->ranks[j] < 0 || s->ranks[j] >= s->shard.count))
                return 0;
    }
    return 1;
}

/* Parse the shard tuples of `list` into a new array (*count of them); NULL with an error set. */
Restricted *parse_all(PyObject *list, Py_ssize_t *count)
{
    PyObject *items = PySequence_Fast(list, "shards must be a sequence");
    if (items == NULL)
        return NULL;
    *count = PySequence_Fast_GET_SIZE(items);
    Restricted *shards = PyMem_Calloc(*count > 0 ? *count : 1, sizeof(Restricted));
    if (shards == NULL)
        PyErr_NoMemory();
    for (Py_ssize_t k = 0; shards != NULL && k < *count; k++)
        if (parse_restricted(PySequence_Fast_GET_ITEM(items, k), &shards[k]) < 0) {
            release_restricted(shards, k + 1);
            shards = NULL;
        }
    Py_DECREF(items);
    return shards;
}

/* How far ahead `held_pass` prefetches a start's table entries. */
#define HELD_AHEAD 8

/* `held_starts`' answers: a start whose previous start is held and whose upper length is that
 * one's less the bytes between them is held too (a suffix of a string found is found), with no
 * lookup; the others are looked up, the table entries of the start HELD_AHEAD on fetched
 * meanwhile. */
static void held_pass(const Restricted *shards, Py_ssize_t count, const Py_ssize_t *positions, Py_ssize_t starts, const int64_t *tops, uint8_t *held)
{
    for (Py_ssize_t at = 0; at < starts; at++) {
        if (at + HELD_AHEAD < starts)
            for (Py_ssize_t k = 0; k < count; k++)
                if (shards[k].ranks[at + HELD_AHEAD] >= 0)
                    PREFETCH(shards[k].shard.table + shards[k].ranks[at + HELD_AHEAD] * shards[k].shard.ratio);
        if (tops[at] <= 0 || (at > 0 && held[at - 1] && tops[at - 1] - (positions[at] - positions[at - 1]) == tops[at]))
            held[at] = 1;
        else
            held[at] = (uint8_t)rank_holds(shards, count, (Py_ssize_t)tops[at], at);
    }
}

/* Per character start of the UTF-8 query, whether the restricted longest match is known to be
 * the unrestricted one (`upper`) without a search: `upper` is 0, `rank_holds` it, or the
 * previous start is held and this one's upper length follows from it.  The shards' tuples are
 * `restricted_longest`'s, each with its own lengths and ranks. */
PyObject *held_starts(PyObject *self, PyObject *args)
{
    PyObject *list, *result = NULL;
    Py_buffer query, upper;
    Py_ssize_t count = 0, *positions = NULL;
    if (!PyArg_ParseTuple(args, "Oy*y*", &list, &query, &upper))
        return NULL;
    Restricted *shards = parse_all(list, &count);
    if (shards == NULL)
        goto done;
    positions = PyMem_Malloc((query.len > 0 ? query.len : 1) * sizeof(Py_ssize_t));
    if (positions == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t starts = character_starts(query.buf, query.len, positions);
    if (upper.len != starts * (Py_ssize_t)sizeof(int64_t) || !answers_fit(shards, count, starts)) {
        PyErr_SetString(PyExc_ValueError, "upper, and each shard's lengths and ranks, must hold one int64 per character start, each rank in the shard");
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; k++)
        if (shards[k].lengths == NULL) {
            PyErr_SetString(PyExc_ValueError, "every shard needs its own lengths and ranks");
            goto done;
        }
    result = PyBytes_FromStringAndSize(NULL, starts);
    if (result == NULL)
        goto done;
    uint8_t *held = (uint8_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    held_pass(shards, count, positions, starts, upper.buf, held);
    Py_END_ALLOW_THREADS
done:
    if (shards != NULL)
        release_restricted(shards, count);
    PyMem_Free(positions);
    PyBuffer_Release(&query);
    PyBuffer_Release(&upper);
    return result;
}
