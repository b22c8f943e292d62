/* The atomic save every writer uses (nnt_file_save): modes, symbolic links,
 * paths that are not regular files, leftovers of killed saves, concurrent
 * saves, a full disk, saves killed at random moments; and opening a path
 * that must be a regular file without blocking. */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nntrainer/file_io.h"

/* n bytes of c; fail makes the writer report an error after writing */
typedef struct payload {
  char c;
  size_t n;
  int fail;
} payload;

static int write_payload(FILE *f, void *ud, nnt_err *e) {
  const payload *p = ud;
  char buf[4096];
  memset(buf, p->c, sizeof buf);
  for (size_t left = p->n, k; left; left -= k) {
    k = left < sizeof buf ? left : sizeof buf;
    if (fwrite(buf, 1, k, f) != k)
      break;
  }
  if (p->fail)
    return nnt_err_set(e, NNT_ERR_INVAL, "the writer gave up");
  return NNT_OK;
}

static int save(const char *path, char c, size_t n, nnt_err *e) {
  payload p = {c, n, 0};
  return nnt_file_save(path, "save", write_payload, &p, e);
}

static void save_ok(const char *path, char c, size_t n) {
  nnt_err e = {0};
  if (save(path, c, n, &e))
    fail_msg("%s", e.msg);
}

/* Whether path holds exactly n bytes of c. */
static int holds(const char *path, char c, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  size_t k = 0;
  int ch, ok = 1;
  while ((ch = fgetc(f)) != EOF) {
    ok &= ch == (unsigned char)c;
    k++;
  }
  fclose(f);
  return ok && k == n;
}

static void write_text(const char *path, const char *s) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(s, f);
  fclose(f);
}

/* Entries of dir other than . and .. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *ent;
  while ((ent = readdir(d)))
    n += strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..");
  closedir(d);
  return n;
}

static unsigned mode_of(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_mode & 07777;
}

static char *in(const char *dir, const char *name) {
  static char buf[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static void test_new_file_mode(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  const mode_t masks[] = {022, 077, 0, 027, 002};
  mode_t old = umask(0);
  for (size_t i = 0; i < NNT_ARRAY_LEN(masks); i++) {
    umask(masks[i]);
    char name[32];
    snprintf(name, sizeof name, "new%zu", i);
    save_ok(in(dir, name), 'x', 10);
    FILE *f = fopen(in(dir, "plain"), "w"); /* what fopen gives */
    fclose(f);
    assert_int_equal(mode_of(in(dir, name)), 0666 & ~masks[i]);
    assert_int_equal(mode_of(in(dir, name)), mode_of(in(dir, "plain")));
    unlink(in(dir, "plain"));
  }
  /* an existing file keeps its mode, whatever the umask */
  umask(077);
  const unsigned modes[] = {0604, 0755, 0640};
  for (size_t i = 0; i < NNT_ARRAY_LEN(modes); i++) {
    write_text(in(dir, "old"), "old");
    assert_int_equal(chmod(in(dir, "old"), modes[i]), 0);
    save_ok(in(dir, "old"), 'y', 20);
    assert_int_equal(mode_of(in(dir, "old")), modes[i]);
    assert_true(holds(in(dir, "old"), 'y', 20));
  }
  umask(old);
  assert_int_equal(entries(dir), NNT_ARRAY_LEN(masks) + 1);
  tu_rmdir(dir);
  free(dir);
}

static void test_symlinks(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), buf[512];
  write_text(in(dir, "real"), "old");
  assert_int_equal(symlink("real", in(dir, "ln")), 0);   /* relative */
  assert_int_equal(symlink("ln", in(dir, "ln2")), 0);    /* a chain */
  assert_int_equal(symlink(in(dir, "real"), in(dir, "abs")), 0);
  const char *links[] = {"ln", "ln2", "abs"};
  for (size_t i = 0; i < NNT_ARRAY_LEN(links); i++) {
    save_ok(in(dir, links[i]), (char)('a' + i), 100 + i);
    struct stat st;
    assert_int_equal(lstat(in(dir, links[i]), &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* the link stays a link */
    assert_true(holds(in(dir, "real"), (char)('a' + i), 100 + i));
  }
  assert_int_equal(readlink(in(dir, "ln"), buf, sizeof buf), 4);
  /* a dangling link: the save creates the file it names */
  assert_int_equal(mkdir(in(dir, "sub"), 0755), 0);
  assert_int_equal(symlink("sub/new.bin", in(dir, "dang")), 0);
  save_ok(in(dir, "dang"), 'd', 7);
  assert_true(holds(in(dir, "sub/new.bin"), 'd', 7));
  assert_int_equal(entries(in(dir, "sub")), 1);
  /* a loop, and a link to a folder */
  assert_int_equal(symlink("l2", in(dir, "l1")), 0);
  assert_int_equal(symlink("l1", in(dir, "l2")), 0);
  assert_int_equal(symlink("sub", in(dir, "ld")), 0);
  nnt_err e = {0};
  assert_int_equal(save(in(dir, "l1"), 'z', 1, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "symbolic links");
  tu_assert_contains(e.msg, in(dir, "l1"));
  assert_int_equal(save(in(dir, "ld"), 'z', 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "it is a directory");
  /* nothing but the files and links made here */
  assert_int_equal(entries(dir), 9);
  tu_rmdir(dir);
  free(dir);
}

static void test_not_regular(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  nnt_err e = {0};
  alarm(20); /* a save that waited on the FIFO would end the test here */
  assert_int_equal(mkfifo(in(dir, "fifo"), 0600), 0);
  const struct {
    const char *path, *needle;
    int code;
  } cases[] = {
      {dir, "it is a directory", NNT_ERR_INVAL},
      {in(dir, "fifo"), "it is a FIFO", NNT_ERR_INVAL},
      {"/dev/null", "it is a character device", NNT_ERR_INVAL},
      {in(dir, "no/such/folder/x"), "cannot create the temporary file", NNT_ERR_IO},
      {in(dir, "missing/"), "names a folder", NNT_ERR_INVAL},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    assert_int_equal(save(cases[i].path, 'x', 10, &e), cases[i].code);
    tu_assert_contains(e.msg, cases[i].path);
    tu_assert_contains(e.msg, cases[i].needle);
  }
  alarm(0);
  struct stat st;
  assert_int_equal(lstat(in(dir, "fifo"), &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  assert_int_equal(stat("/dev/null", &st), 0);
  assert_true(S_ISCHR(st.st_mode));
  assert_int_equal(entries(dir), 1);
  /* a file that fopen could not write is not replaced either */
  write_text(in(dir, "ro"), "keep");
  assert_int_equal(chmod(in(dir, "ro"), 0444), 0);
  int writable = access(in(dir, "ro"), W_OK) == 0; /* root may */
  assert_int_equal(save(in(dir, "ro"), 'x', 3, &e), writable ? NNT_OK : NNT_ERR_PERM);
  if (!writable)
    tu_assert_contains(e.msg, "cannot write");
  assert_int_equal(holds(in(dir, "ro"), 'x', 3), writable);
  tu_rmdir(dir);
  free(dir);
}

static void test_temporary_files(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  nnt_err e = {0};
  /* a leftover of a killed save is removed, and does not lend its mode */
  write_text(in(dir, ".w.bin.nnt-tmp"), "half a file");
  assert_int_equal(chmod(in(dir, ".w.bin.nnt-tmp"), 0600), 0);
  mode_t old = umask(022);
  save_ok(in(dir, "w.bin"), 'n', 50);
  umask(old);
  assert_int_equal(mode_of(in(dir, "w.bin")), 0644);
  assert_int_equal(entries(dir), 1);
  /* a save in progress (its temporary file locked) is not disturbed */
  int fd = open(in(dir, ".w.bin.nnt-tmp"), O_WRONLY | O_CREAT, 0644);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  assert_int_equal(save(in(dir, "w.bin"), 'o', 60, &e), NNT_ERR_TRY_AGAIN);
  tu_assert_contains(e.msg, "another save to");
  tu_assert_contains(e.msg, "in progress");
  assert_true(holds(in(dir, "w.bin"), 'n', 50));
  close(fd); /* that save died */
  save_ok(in(dir, "w.bin"), 'o', 60);
  assert_int_equal(entries(dir), 1);
  /* a writer that fails leaves the old file and no temporary file */
  payload p = {'q', 5000, 1};
  assert_int_equal(nnt_file_save(in(dir, "w.bin"), "save", write_payload, &p, &e),
                   NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "the writer gave up");
  assert_true(holds(in(dir, "w.bin"), 'o', 60));
  assert_int_equal(entries(dir), 1);
  /* a name near NAME_MAX still has room for its temporary file */
  char name[251];
  memset(name, 'n', 250);
  name[250] = '\0';
  save_ok(in(dir, name), 'l', 9);
  save_ok(in(dir, name), 'm', 9);
  assert_true(holds(in(dir, name), 'm', 9));
  assert_int_equal(entries(dir), 2);
  tu_rmdir(dir);
  free(dir);
}

/* A write past RLIMIT_FSIZE (SIGXFSZ ignored) fails as a full disk does. */
static void test_full_disk(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  save_ok(in(dir, "w.bin"), 'o', 1000);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit r = {64 * 1024, 64 * 1024};
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &r))
      _exit(2);
    nnt_err e = {0};
    int rc = save(in(dir, "w.bin"), 'n', 1 << 20, &e);
    _exit(rc == NNT_ERR_IO && strstr(e.msg, "File too large") && strstr(e.msg, "w.bin") ? 0
                                                                                        : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(holds(in(dir, "w.bin"), 'o', 1000));
  assert_int_equal(entries(dir), 1);
  tu_rmdir(dir);
  free(dir);
}

/* A child saves A and B in turn without end; it is killed at a random
 * moment. The file must hold A or B whole, and at most one temporary file
 * may be left, which the next save removes. */
#define KILL_TRIALS 150
#define A_BYTES 100000
#define B_BYTES 300000

static void test_killed_saves(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), path[1024];
  snprintf(path, sizeof path, "%s/w.bin", dir);
  save_ok(path, 'a', A_BYTES);
  unsigned seed = (unsigned)time(NULL);
  nnt_rng r;
  nnt_rng_seed(&r, seed);
  int saw_a = 0, saw_b = 0, saw_tmp = 0;
  for (int t = 0; t < KILL_TRIALS; t++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      for (unsigned k = 0;; k++)
        save(path, k % 2 ? 'a' : 'b', k % 2 ? A_BYTES : B_BYTES, NULL);
    }
    usleep(nnt_rng_below(&r, 6000));
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    int a = holds(path, 'a', A_BYTES), b = holds(path, 'b', B_BYTES);
    if (!a && !b)
      fail_msg("trial %d (seed %u): the file is neither whole version", t, seed);
    int n = entries(dir);
    if (n > 2)
      fail_msg("trial %d (seed %u): %d files in the folder", t, seed, n);
    saw_a += a, saw_b += b, saw_tmp += n == 2;
  }
  print_message("%d kills: the file held A %d times, B %d times; %d left a temporary file\n",
                KILL_TRIALS, saw_a, saw_b, saw_tmp);
  save_ok(path, 'c', 10);
  assert_int_equal(entries(dir), 1);
  tu_rmdir(dir);
  free(dir);
}

static void test_open_regular(void **state) {
  (void)state;
  char *dir = tu_mkdtemp();
  write_text(in(dir, "f"), "12345");
  nnt_err e = {0};
  int fd;
  uint64_t size;
  assert_int_equal(nnt_file_open_regular(in(dir, "f"), "load", &fd, &size, &e), NNT_OK);
  assert_int_equal(size, 5);
  assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* blocking again */
  char buf[8];
  assert_int_equal(read(fd, buf, sizeof buf), 5);
  close(fd);
  alarm(20);
  assert_int_equal(mkfifo(in(dir, "fifo"), 0600), 0);
  const struct {
    const char *path, *needle;
    int code;
  } cases[] = {
      {dir, "is a directory, not a regular file", NNT_ERR_INVAL},
      {in(dir, "fifo"), "is a FIFO, not a regular file", NNT_ERR_INVAL},
      {"/dev/zero", "is a character device", NNT_ERR_INVAL},
      {"/dev/null", "is a character device", NNT_ERR_INVAL},
      {in(dir, "missing"), "cannot open", NNT_ERR_IO},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    assert_int_equal(nnt_file_open_regular(cases[i].path, "load", &fd, &size, &e),
                     cases[i].code);
    tu_assert_contains(e.msg, "load: ");
    tu_assert_contains(e.msg, cases[i].path);
    tu_assert_contains(e.msg, cases[i].needle);
  }
  alarm(0);
  tu_rmdir(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_file_mode),    cmocka_unit_test(test_symlinks),
      cmocka_unit_test(test_not_regular),      cmocka_unit_test(test_temporary_files),
      cmocka_unit_test(test_full_disk),        cmocka_unit_test(test_killed_saves),
      cmocka_unit_test(test_open_regular),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
