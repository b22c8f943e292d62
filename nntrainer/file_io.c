/* Opening files that must be regular without blocking, and the one atomic
 * save every writer of the library goes through (weights, INI, dumps). */
#include "nntrainer/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40   /* as the kernel's limit for one path walk */
#define MAX_TRIES 16   /* attempts to own the temporary file */
#define TMP_SUFFIX ".nnt-tmp"

const char *nnt_file_kind(unsigned mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "not a regular file";
}

int nnt_file_open_regular(const char *path, const char *what, int *fd_out, uint64_t *size,
                          nnt_err *e) {
  struct stat st;
  /* look before opening: opening a device can have effects of its own */
  if (stat(path, &st))
    return nnt_err_set(e, NNT_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: '%s' is %s, not a regular file", what, path,
                       nnt_file_kind(st.st_mode));
  /* O_NONBLOCK: a FIFO put there since the stat must not wait for a writer */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return nnt_err_set(e, NNT_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
  int flags;
  if (fstat(fd, &st)) {
    int rc = nnt_err_set(e, NNT_ERR_IO, "%s: cannot read '%s': %s", what, path,
                         strerror(errno));
    close(fd);
    return rc;
  }
  if (!S_ISREG(st.st_mode)) { /* replaced since the stat */
    int rc = nnt_err_set(e, NNT_ERR_INVAL, "%s: '%s' is %s, not a regular file", what, path,
                         nnt_file_kind(st.st_mode));
    close(fd);
    return rc;
  }
  if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    int rc = nnt_err_set(e, NNT_ERR_IO, "%s: cannot read '%s': %s", what, path,
                         strerror(errno));
    close(fd);
    return rc;
  }
  *fd_out = fd;
  *size = (uint64_t)st.st_size;
  return NNT_OK;
}

/* ---- atomic save ---------------------------------------------------- */

typedef struct save_ctx {
  const char *path, *what;  /* as given, for messages */
  char *target;             /* path with its symbolic links followed */
  char *dir, *tmp;          /* the target's folder; the temporary file */
  struct stat st;           /* the target's, when it exists */
  int exists;
  int fd;                   /* the temporary file, locked */
} save_ctx;

static int fail(save_ctx *c, int code, const char *doing, int err, nnt_err *e) {
  if (strcmp(c->path, c->target ? c->target : c->path))
    return nnt_err_set(e, code, "%s: %s '%s' (the file the link '%s' names): %s", c->what,
                       doing, c->target, c->path, strerror(err));
  return nnt_err_set(e, code, "%s: %s '%s': %s", c->what, doing, c->path, strerror(err));
}

/* The first dir_len characters of dir, then rel. */
static char *join(const char *dir, size_t dir_len, const char *rel) {
  size_t r = strlen(rel);
  char *p = nnt_malloc(dir_len + r + 1);
  if (p) {
    memcpy(p, dir, dir_len);
    memcpy(p + dir_len, rel, r + 1);
  }
  return p;
}

/* Follow the symbolic links of path to the file a save replaces (a dangling
 * link gives the file it names, which the save creates). */
static int resolve(save_ctx *c, nnt_err *e) {
  char *cur = nnt_strdup(c->path);
  if (!cur)
    return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory", c->what);
  for (int hops = 0;; hops++) {
    if (lstat(cur, &c->st)) {
      if (errno != ENOENT) {
        int err = errno;
        c->target = cur;
        return fail(c, NNT_ERR_IO, "cannot reach", err, e);
      }
      c->exists = 0;
      break;
    }
    if (!S_ISLNK(c->st.st_mode)) {
      c->exists = 1;
      break;
    }
    if (hops == MAX_LINKS) {
      c->target = cur;
      return fail(c, NNT_ERR_IO, "cannot reach", ELOOP, e);
    }
    size_t cap = c->st.st_size > 0 ? (size_t)c->st.st_size + 1 : 256;
    char *link = NULL;
    ssize_t n;
    for (;;) { /* the size lstat gives can be wrong (procfs) or change */
      nnt_free(link);
      link = nnt_malloc(cap + 1);
      if (!link) {
        nnt_free(cur);
        return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory", c->what);
      }
      n = readlink(cur, link, cap);
      if (n < 0 || (size_t)n < cap || cap > 65536)
        break;
      cap *= 2;
    }
    if (n < 0) {
      int err = errno;
      nnt_free(link);
      c->target = cur;
      return fail(c, NNT_ERR_IO, "cannot read the link", err, e);
    }
    link[n] = '\0';
    const char *slash = strrchr(cur, '/');
    char *next = link[0] == '/' ? nnt_strdup(link)
                                : join(cur, slash ? (size_t)(slash - cur) + 1 : 0, link);
    nnt_free(link);
    nnt_free(cur);
    if (!next)
      return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory", c->what);
    cur = next;
  }
  c->target = cur;
  if (c->exists && !S_ISREG(c->st.st_mode))
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: cannot write '%s': it is %s, not a regular file",
                       c->what, c->target, nnt_file_kind(c->st.st_mode));
  /* a file we could not write in place is not replaced behind its back */
  if (c->exists && faccessat(AT_FDCWD, c->target, W_OK, AT_EACCESS))
    return fail(c, NNT_ERR_PERM, "cannot write", errno, e);
  /* the folder and the temporary file's name: ".NAME.nnt-tmp" beside it */
  const char *slash = strrchr(c->target, '/');
  const char *base = slash ? slash + 1 : c->target;
  if (!base[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: '%s' names a folder, not a file", c->what,
                       c->path);
  c->dir = !slash ? nnt_strdup(".")
           : slash == c->target ? nnt_strdup("/")
                                : join(c->target, (size_t)(slash - c->target), "");
  size_t blen = strlen(base), keep = blen > 200 ? 200 : blen;
  size_t dlen = slash ? (size_t)(slash - c->target) + 1 : 0;
  c->tmp = nnt_malloc(dlen + keep + 32);
  if (!c->dir || !c->tmp)
    return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory", c->what);
  memcpy(c->tmp, c->target, dlen);
  c->tmp[dlen] = '.';
  memcpy(c->tmp + dlen + 1, base, keep);
  char *p = c->tmp + dlen + 1 + keep;
  if (keep < blen) { /* a long name: keep NAME_MAX, tell names apart by a hash */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < blen; i++)
      h = (h ^ (unsigned char)base[i]) * 16777619u;
    p += snprintf(p, 12, "~%08x", (unsigned)h);
  }
  memcpy(p, TMP_SUFFIX, sizeof TMP_SUFFIX);
  return NNT_OK;
}

/* Own the temporary file: create it, or find one left by a save that was
 * killed (nobody holds its lock), remove it and create it again. The lock
 * (flock) keeps two saves to one path from writing the same temporary file;
 * a lock taken on a file that was renamed or removed meanwhile is let go. */
static int take_tmp(save_ctx *c, nnt_err *e) {
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    int created = 1;
    int fd = open(c->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 && errno == EEXIST) {
      created = 0;
      fd = open(c->tmp, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
      if (fd < 0 && errno == ENOENT)
        continue;
    }
    if (fd < 0)
      return nnt_err_set(e, NNT_ERR_IO, "%s: cannot create the temporary file '%s' for '%s': %s",
                         c->what, c->tmp, c->path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK) {
      close(fd);
      return nnt_err_set(e, NNT_ERR_TRY_AGAIN,
                         "%s: another save to '%s' is in progress (its temporary file '%s' is "
                         "locked)",
                         c->what, c->path, c->tmp);
    }
    /* (a file system without locks: go on unlocked) */
    struct stat a, b;
    if (fstat(fd, &a) || lstat(c->tmp, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
      close(fd);
      continue;
    }
    if (!S_ISREG(a.st_mode)) {
      close(fd);
      return nnt_err_set(e, NNT_ERR_IO, "%s: '%s' is in the way of the save to '%s': it is %s",
                         c->what, c->tmp, c->path, nnt_file_kind(a.st_mode));
    }
    if (!created) {
      /* left by an interrupted save: start from a fresh file, so a new
       * target gets this process's umask */
      unlink(c->tmp);
      close(fd);
      continue;
    }
    c->fd = fd;
    return NNT_OK;
  }
  return nnt_err_set(e, NNT_ERR_TRY_AGAIN,
                     "%s: cannot take the temporary file '%s' for '%s': other saves keep "
                     "replacing it",
                     c->what, c->tmp, c->path);
}

/* Sync the folder so that the rename itself survives a crash. File systems
 * that cannot sync a folder say EINVAL; that is not an error here. */
static int sync_dir(save_ctx *c, nnt_err *e) {
  int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return nnt_err_set(e, NNT_ERR_IO, "%s: saved '%s' but cannot open its folder '%s': %s",
                       c->what, c->path, c->dir, strerror(errno));
  int rc = NNT_OK;
  if (fsync(dfd) && errno != EINVAL && errno != EROFS && errno != ENOTSUP)
    rc = nnt_err_set(e, NNT_ERR_IO, "%s: saved '%s' but cannot sync its folder '%s': %s",
                     c->what, c->path, c->dir, strerror(errno));
  close(dfd);
  return rc;
}

/* Write, sync and give the temporary file the target's mode and owner. */
static int fill(save_ctx *c, nnt_file_writer writer, void *ud, nnt_err *e) {
  int dfd = dup(c->fd); /* the stream closes its own: c->fd keeps the lock */
  FILE *f = dfd >= 0 ? fdopen(dfd, "wb") : NULL;
  if (!f) {
    int err = errno;
    if (dfd >= 0)
      close(dfd);
    return fail(c, NNT_ERR_IO, "cannot write", err, e);
  }
  int rc = writer(f, ud, e);
  int ok = fflush(f) == 0 && !ferror(f);
  int err = ok ? 0 : errno ? errno : EIO;
  if (fclose(f) && ok) {
    ok = 0;
    err = errno;
  }
  if (rc)
    return rc;
  if (!ok)
    return fail(c, NNT_ERR_IO, "cannot write", err, e);
  if (c->exists) {
    struct stat now;
    if (fchmod(c->fd, c->st.st_mode & 07777))
      return fail(c, NNT_ERR_IO, "cannot keep the mode of", errno, e);
    /* keeping another owner needs privileges; without them the new file is
     * the saver's, as docs/weights.md says */
    if (!fstat(c->fd, &now) && (now.st_uid != c->st.st_uid || now.st_gid != c->st.st_gid)) {
      int ignored = fchown(c->fd, c->st.st_uid, c->st.st_gid);
      (void)ignored;
    }
  }
  if (fsync(c->fd))
    return fail(c, NNT_ERR_IO, "cannot write", errno, e);
  return NNT_OK;
}

int nnt_file_save(const char *path, const char *what, nnt_file_writer writer, void *user_data,
                  nnt_err *e) {
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: no file path given", what);
  save_ctx c = {.path = path, .what = what, .fd = -1};
  int rc = resolve(&c, e);
  if (!rc)
    rc = take_tmp(&c, e);
  if (!rc) {
    rc = fill(&c, writer, user_data, e);
    if (!rc && rename(c.tmp, c.target))
      rc = fail(&c, NNT_ERR_IO, "cannot replace", errno, e);
    if (rc)
      unlink(c.tmp); /* still ours: the lock is held until the close below */
    else
      rc = sync_dir(&c, e);
    close(c.fd);
  }
  nnt_free(c.target);
  nnt_free(c.dir);
  nnt_free(c.tmp);
  return rc;
}
