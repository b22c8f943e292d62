/* Files the library reads and writes: opening a path that must be a
 * regular file without ever blocking, and saving a file atomically. */
#ifndef NNT_FILE_IO_H
#define NNT_FILE_IO_H

#include <stdint.h>
#include <stdio.h>

#include "nntrainer/common.h"

/* Open path for reading. A path that is not a regular file (a directory,
 * FIFO, socket or device) is refused before it is opened, and the open
 * itself does not wait for a FIFO's writer should one appear in between.
 * what starts the messages ("load", "dataset"). On success *fd is a
 * blocking descriptor the caller closes and *size the file's size. */
int nnt_file_open_regular(const char *path, const char *what, int *fd, uint64_t *size,
                          nnt_err *e);

/* Fill f with a file's content; return NNT_OK or an error set in e. Write
 * errors are found by the caller (ferror, fflush). */
typedef int (*nnt_file_writer)(FILE *f, void *user_data, nnt_err *e);

/* Save path atomically: the content goes to a temporary file in the
 * target's own folder (".NAME.nnt-tmp"), which is synced, renamed over the
 * target, and the folder synced, so that at any moment path holds either
 * its old content or the complete new one.
 * - A symbolic link is followed: its target is replaced, the link stays.
 * - A new file gets mode 0666 & ~umask, as fopen() would give it; an
 *   existing one keeps its mode (and its owner and group where the caller
 *   may set them).
 * - A target that exists and is not a regular file (a directory, FIFO,
 *   device) is refused; nothing is opened that could block.
 * - A temporary file left by a save that was killed is removed by the next
 *   save to the same path; while another save to the same path is in
 *   progress (its temporary file is locked) the save fails with
 *   NNT_ERR_TRY_AGAIN.
 * - On any error (a full disk, a write that exceeds RLIMIT_FSIZE) the
 *   temporary file is removed and the target is left as it was.
 * what starts the messages ("save", "dump"). */
int nnt_file_save(const char *path, const char *what, nnt_file_writer writer, void *user_data,
                  nnt_err *e);

/* "a directory", "a FIFO", ... for a st_mode that is not a regular file. */
const char *nnt_file_kind(unsigned mode);

#endif
