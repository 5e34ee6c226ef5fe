/* One directory read in native code: its entries' names, kinds and, for each entry not a
 * directory or a link, its lstat (size, mtime, inode), with the interpreter lock released.
 * No link is followed and no file is opened: entries are read from the directory's
 * descriptor and each is stat'ed relative to it (fstatat, AT_SYMLINK_NOFOLLOW). The rules of
 * the walk (names, hidden names, prefixes, links, special files) stay in walk.py. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* kinds, as walk.py reads them */
#define KIND_DIR 'd'
#define KIND_LINK 'l'
#define KIND_FILE 'f'
#define KIND_SPECIAL 's'

typedef struct {
    char *data;
    size_t used, size;
} buffer;

static int grow(buffer *b, size_t more) {
    if (b->used + more <= b->size)
        return 0;
    size_t size = b->size ? b->size : 4096;
    while (size < b->used + more)
        size *= 2;
    char *data = realloc(b->data, size);
    if (data == NULL)
        return -1;
    b->data = data;
    b->size = size;
    return 0;
}

static int put(buffer *b, const void *bytes, size_t n) {
    if (grow(b, n) < 0)
        return -1;
    memcpy(b->data + b->used, bytes, n);
    b->used += n;
    return 0;
}

/* Read the directory open on ``fd`` (closed here) into names (each ended by a NUL), kinds
 * (a byte each) and stats (four int64 each: size, mtime seconds, mtime nanoseconds, inode);
 * 0, or an errno. */
static int read_dir(int fd, buffer *names, buffer *kinds, buffer *stats) {
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        int err = errno;
        close(fd);
        return err;
    }
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *entry = readdir(dir);
        if (entry == NULL) {
            err = errno;
            break;
        }
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))
            continue;
        int64_t row[4] = {0, 0, 0, 0};
        char kind;
        if (entry->d_type == DT_DIR) {
            kind = KIND_DIR;
        } else if (entry->d_type == DT_LNK) {
            kind = KIND_LINK;
        } else {
            struct stat st;
            if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                err = errno;
                break;
            }
            if (S_ISDIR(st.st_mode))
                kind = KIND_DIR;
            else if (S_ISLNK(st.st_mode))
                kind = KIND_LINK;
            else
                kind = S_ISREG(st.st_mode) ? KIND_FILE : KIND_SPECIAL;
            row[0] = (int64_t)st.st_size;
            row[1] = (int64_t)st.st_mtim.tv_sec;
            row[2] = (int64_t)st.st_mtim.tv_nsec;
            uint64_t inode = (uint64_t)st.st_ino;
            memcpy(&row[3], &inode, sizeof inode);
        }
        if (put(names, name, strlen(name) + 1) < 0 || put(kinds, &kind, 1) < 0 ||
            put(stats, row, sizeof row) < 0) {
            err = ENOMEM;
            break;
        }
    }
    closedir(dir);
    return err;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&:scan", PyUnicode_FSConverter, &path))
        return NULL;
    buffer names = {0}, kinds = {0}, stats = {0};
    int err;
    Py_BEGIN_ALLOW_THREADS
    int fd = open(PyBytes_AS_STRING(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    err = fd < 0 ? errno : read_dir(fd, &names, &kinds, &stats);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (err == ENOMEM)
        PyErr_NoMemory();
    else if (err != 0) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    } else
        result = Py_BuildValue("y#y#y#", names.data ? names.data : "", (Py_ssize_t)names.used,
                               kinds.data ? kinds.data : "", (Py_ssize_t)kinds.used,
                               stats.data ? stats.data : "", (Py_ssize_t)stats.used);
    free(names.data);
    free(kinds.data);
    free(stats.data);
    Py_DECREF(path);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(path) -> (names, kinds, stats): one directory's entries (names each ended by a "
     "NUL; a kind byte each: d, l, f, s; four int64 each: size, mtime seconds, mtime "
     "nanoseconds, inode, zeros for directories and links), links not followed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "One directory read in native code.", -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
