/*
 * tessera.h - the C API of the Tessera burst-buffer file system (libtessera.so).
 *
 * Build against it with pkg-config:
 *
 *     cc -o app app.c $(pkg-config --cflags --libs tessera)
 *
 * A program connects to the instance of its job (tessera_connect), opens files under the
 * mount prefix (/tessera by default) with a consistency model, and reads and writes them. The
 * model decides when writes become visible to other processes:
 *
 *     TESSERA_MODEL_POSIX    at every write; every read sees the newest bytes
 *     TESSERA_MODEL_COMMIT   at tessera_commit (or close); every read sees what was committed
 *     TESSERA_MODEL_SESSION  at tessera_close / tessera_session_close; seen by handles opened
 *                            (or tessera_session_open'ed) after that - close-to-open
 *     TESSERA_MODEL_MPIIO    at tessera_sync (or close); seen after the reader's tessera_sync
 *
 * Under every model, closing a file publishes what this process wrote to it.
 *
 * The primitives below the models (the BaseFS of Wang, Mohror and Snir) are exposed too: tessera_attach makes
 * ranges this process wrote visible, tessera_query lists who holds the newest bytes of a
 * range, tessera_detach gives ranges up, tessera_flush writes them to the parallel file system.
 *
 * Errors: functions returning int return 0 (or a count) on success and -1 on failure;
 * functions returning ssize_t or int64_t return -1 on failure; functions returning a pointer
 * return NULL on failure. On failure errno is set (ENOENT, EACCES, EINVAL, ENOSPC, EAGAIN,
 * ECONNREFUSED, ...) and tessera_errmsg() returns a sentence that names what was wrong and how
 * to fix it. Passing NULL for a required handle fails with EINVAL, for a buffer, a string or
 * a result pointer with EFAULT (as the kernel answers); it never crashes.
 *
 * Threads: a tessera_client may be shared by the threads of a process; a tessera_file must be
 * used by one thread at a time. The library starts no threads of its own. After fork, the
 * child may go on using its handles: it becomes a new client with its own logs.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header and library: major * 10000 + minor * 100 + patch. */
#define TESSERA_VERSION 100

/* A connection to one Tessera instance (opaque). */
typedef struct tessera_client tessera_client;

/* An open Tessera file (opaque). */
typedef struct tessera_file tessera_file;

/* Consistency models; TESSERA_MODEL_DEFAULT takes the instance's default (session unless the
 * instance was started with another). */
typedef enum tessera_model {
    TESSERA_MODEL_DEFAULT = 0,
    TESSERA_MODEL_POSIX = 1,
    TESSERA_MODEL_COMMIT = 2,
    TESSERA_MODEL_SESSION = 3,
    TESSERA_MODEL_MPIIO = 4
} tessera_model;

/* File kinds in struct tessera_stat. */
#define TESSERA_KIND_FILE 1
#define TESSERA_KIND_DIR 2
#define TESSERA_KIND_SYMLINK 3 /* a symbolic link found in the PFS directory */

/* Attributes of a file or directory. */
struct tessera_stat {
    uint64_t ino;      /* inode number */
    uint32_t kind;     /* TESSERA_KIND_FILE, _DIR or _SYMLINK */
    uint32_t mode;     /* permission bits (0644, ...) */
    uint32_t uid;
    uint32_t gid;
    uint64_t size;     /* bytes, as published; see tessera_fstat for this process's view */
    int64_t atime_ns;  /* nanoseconds since the epoch */
    int64_t mtime_ns;
    int64_t ctime_ns;
};

/* One range [start, end) of a file and the process whose log holds its newest bytes. */
struct tessera_extent {
    uint64_t start;
    uint64_t end;
    uint32_t node;     /* daemon (node) the owning process belongs to */
    uint64_t client;   /* the owning process's client id on that node */
};

/* Where the bytes of a located extent can be read from (struct tessera_location). */
#define TESSERA_IN_HOLE 0         /* nowhere: zeros */
#define TESSERA_IN_BURST_BUFFER 1 /* the burst buffer of the extent's node only */
#define TESSERA_IN_PFS 2          /* the PFS copy only */
#define TESSERA_IN_BOTH 3         /* the burst buffer of the extent's node and the PFS copy */

/* Room for a host name or a daemon address, with its NUL (longer ones are cut). */
#define TESSERA_HOST_MAX 64

/* One extent of a located range and where it lives. */
struct tessera_location {
    uint64_t start;
    uint64_t end;
    int32_t node;                  /* the daemon holding it; -1 for PFS-only bytes and holes */
    uint32_t residence;            /* TESSERA_IN_* */
    char host[TESSERA_HOST_MAX];   /* that daemon's host, as Slurm and MPI name it; "" if none */
    char addr[TESSERA_HOST_MAX];   /* that daemon's address:port; "" if none */
};

/* Where most of one file's bytes live, as a batch locate answers per path. */
struct tessera_placement {
    int32_t error;                 /* 0, or the errno of this path's failure */
    uint32_t hosts;                /* hosts holding some of its bytes in their burst buffers */
    uint64_t size;
    uint64_t best_bytes;           /* bytes on the best host */
    int64_t view_time_ns;          /* when the answer was assembled (ns since the epoch) */
    char best_host[TESSERA_HOST_MAX]; /* the host holding most bytes; "" if none */
};

/* Lock kinds for tessera_lock. */
#define TESSERA_LOCK_SHARED 0
#define TESSERA_LOCK_EXCLUSIVE 1

/* ---- errors and versions ---------------------------------------------------------------- */

/* The message of the last failed call of this thread ("" if none failed yet). The string
 * stays valid until the next failing call of this thread. */
const char *tessera_errmsg(void);

/* The library's version, as TESSERA_VERSION. */
int tessera_version(void);

/* The name of a model ("posix", "commit", "session", "mpiio", or "default"); NULL for a
 * value that is not a model. */
const char *tessera_model_name(tessera_model model);

/* Parses a model name (as TESSERA_MODEL accepts: posix, commit, session, mpiio); -1 and
 * EINVAL for anything else (EFAULT for NULL). */
int tessera_model_from_name(const char *name);

/* ---- connecting --------------------------------------------------------------------------- */

/* Connects to the daemon of this process's node in the instance at directory `instance`
 * (NULL: $TESSERA_INSTANCE, else $XDG_RUNTIME_DIR/tessera, else ~/.tessera). `node` picks the daemon; -1 takes
 * $TESSERA_NODE, else the MPI rank or the process id spread over the daemons.
 * Fails with ECONNREFUSED if no daemon runs there (the message says how to start one). */
tessera_client *tessera_connect(const char *instance, int node);

/* Releases the client. Files opened through it stay usable until they are closed; the
 * connection to the daemon closes with the last of them. NULL is accepted. */
int tessera_disconnect(tessera_client *client);

/* ---- namespace ---------------------------------------------------------------------------- */

/* Attributes of `path` (under the mount prefix, e.g. "/tessera/run1/ckpt"). */
int tessera_stat(tessera_client *client, const char *path, struct tessera_stat *st);

/* Creates a directory (its parent must exist). */
int tessera_mkdir(tessera_client *client, const char *path, mode_t mode);

/* Removes an empty directory. */
int tessera_rmdir(tessera_client *client, const char *path);

/* Removes a file. */
int tessera_unlink(tessera_client *client, const char *path);

/* Renames a file or an empty directory (inside Tessera). */
int tessera_rename(tessera_client *client, const char *from, const char *to);

/* ---- files -------------------------------------------------------------------------------- */

/* Opens `path` with open(2) flags: O_RDONLY, O_WRONLY or O_RDWR, with O_CREAT, O_EXCL,
 * O_TRUNC, O_APPEND (others without meaning here, such as O_CLOEXEC, are accepted). `mode`
 * is used when the file is created. `model` chooses the file's consistency model. A handle
 * opened for reading under the session or MPI-IO model learns at open which bytes were
 * published before it. */
tessera_file *tessera_open(tessera_client *client, const char *path, int flags, mode_t mode,
                           tessera_model model);

/* Closes the handle: publishes this process's writes to the file (every model) and releases
 * its locks. The handle is freed even when publishing fails (the error is returned). NULL is
 * accepted and does nothing. */
int tessera_close(tessera_file *file);

/* Reads up to `count` bytes at the file position and advances it; 0 at end of file. */
ssize_t tessera_read(tessera_file *file, void *buf, size_t count);

/* Writes `count` bytes at the file position (at the end for O_APPEND) and advances it.
 * The bytes go to this process's log on the node; no message is sent (except under the
 * posix model). Returns `count` or -1. */
ssize_t tessera_write(tessera_file *file, const void *buf, size_t count);

/* Reads up to `count` bytes at `offset` without moving the file position. */
ssize_t tessera_pread(tessera_file *file, void *buf, size_t count, int64_t offset);

/* Writes `count` bytes at `offset` without moving the file position. */
ssize_t tessera_pwrite(tessera_file *file, const void *buf, size_t count, int64_t offset);

/* Moves the file position (whence: SEEK_SET, SEEK_CUR, SEEK_END); returns the new one. */
int64_t tessera_seek(tessera_file *file, int64_t offset, int whence);

/* Attributes of the open file; `size` is the size this process sees (what was published
 * and its own writes). The other attributes are those of the file now at the path the handle
 * was opened with (after a rename or unlink of the open file: the new file there, or ENOENT). */
int tessera_fstat(tessera_file *file, struct tessera_stat *st);

/* The consistency model the file was opened with (never TESSERA_MODEL_DEFAULT); -1 and
 * EINVAL for a NULL file. */
int tessera_file_model(tessera_file *file);

/* ---- consistency models ------------------------------------------------------------------- */

/* Commit: makes this process's writes to the file visible to every later read by any process
 * (the commit model's synchronisation; valid under every model). */
int tessera_commit(tessera_file *file);

/* fsync: commit, and make this process's log of the file durable on the burst buffer. */
int tessera_fsync(tessera_file *file);

/* Session open: learn which bytes are published now (done by tessera_open already). */
int tessera_session_open(tessera_file *file);

/* Session close: publish this process's writes (done by tessera_close as well). */
int tessera_session_close(tessera_file *file);

/* MPI-IO sync: publish this process's writes, then learn everyone's. With a barrier between
 * two syncs (sync, barrier, sync) every process sees the others' writes. */
int tessera_sync(tessera_file *file);

/* ---- primitives (attach, query, detach, flush) -------------------------------------------- */

/* Makes this process's writes of [offset, offset + len) visible to all processes. Every byte
 * of the range must have been written by this process (EINVAL names the first gap). */
int tessera_attach(tessera_file *file, uint64_t offset, uint64_t len);

/* Attaches every write of this process to the file not attached yet. */
int tessera_attach_file(tessera_file *file);

/* Lists who holds the newest attached bytes of [offset, offset + len): up to `max` extents
 * are stored in `out` (ascending, disjoint; bytes no process holds are left out). Returns the
 * total number of extents, which may exceed `max` (call again with a larger array, as with
 * snprintf). `out` may be NULL when `max` is 0. */
int64_t tessera_query(tessera_file *file, uint64_t offset, uint64_t len,
                      struct tessera_extent *out, size_t max);

/* As tessera_query, for the whole file; also refreshes what this handle sees. */
int64_t tessera_query_file(tessera_file *file, struct tessera_extent *out, size_t max);

/* Gives up this process's ownership of [offset, offset + len), which it must have attached
 * (EINVAL otherwise), and drops those bytes from its log. Flush first to keep them. */
int tessera_detach(tessera_file *file, uint64_t offset, uint64_t len);

/* Gives up all of this process's ownership of the file. */
int tessera_detach_file(tessera_file *file);

/* Writes the attached bytes of [offset, offset + len) to the parallel file system (this
 * process's unattached writes are attached first); returns the bytes written. */
int64_t tessera_flush(tessera_file *file, uint64_t offset, uint64_t len);

/* Writes the whole file to the parallel file system, atomically (readers of the PFS never see
 * a half-written file); returns the bytes written. */
int64_t tessera_flush_file(tessera_file *file);

/* ---- locality (for schedulers) ------------------------------------------------------------ */

/* Where the bytes of [offset, offset + len) of `path` live (len UINT64_MAX: to the end of the
 * file): up to `max` extents are stored in `out`, ascending and touching, cut at the file's
 * size. Returns the number of extents the answer lists (at most 4096; if that exceeds `max`,
 * call again with a larger array). A listing of 4096 may stop before the range's end: ask
 * again from the last extent's `end`. If `view_time_ns` is not NULL it receives when the
 * answer was assembled. Answers are advisory: acting on a stale one costs speed, never
 * correctness. */
int64_t tessera_locate(tessera_client *client, const char *path, uint64_t offset, uint64_t len,
                       struct tessera_location *out, size_t max, int64_t *view_time_ns);

/* For each of `n` paths, the host holding most of its bytes, in one request to the daemon
 * (whatever `n`, a few batched rounds between the daemons). A path that fails sets its
 * entry's `error` and leaves the others answered. Returns 0, or -1 with errno if the whole
 * call failed. */
int tessera_locate_many(tessera_client *client, const char *const *paths, size_t n,
                        struct tessera_placement *out);

/* ---- byte-range locks --------------------------------------------------------------------- */

/* Locks [offset, offset + len) (len 0: to the end of the file, including later growth) for
 * this process, shared or exclusive (TESSERA_LOCK_*). With `wait` non-zero, blocks until
 * granted; otherwise fails with EAGAIN naming the holder. Same semantics as fcntl record
 * locks; after it, reads see what the previous holder wrote under the lock. */
int tessera_lock(tessera_file *file, uint64_t offset, uint64_t len, int kind, int wait);

/* Publishes this process's writes, then releases its locks on [offset, offset + len). */
int tessera_unlock(tessera_file *file, uint64_t offset, uint64_t len);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
