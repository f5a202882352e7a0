/*
 * The tree changes of tests/fuzz/probe.py and tests/oracle/probe.py (their mutate()),
 * for tests/oracle/static_probe.c, which includes this file: the probe stays one
 * translation unit that `gcc -static ... static_probe.c` builds (docs/static-linking.md
 * shows that command).  Each change is the Python call it stands for, errno for errno:
 * shutil.rmtree, os.makedirs and os.path.join as CPython 3.11 does them.  It uses the
 * probe's die(), fuzz, STEP_EPOCH and RECENT.
 */
#ifndef STATIC_TREE_H
#define STATIC_TREE_H

/* os.path.join($STATIC_PROBE_ROOT, rel) */
static char *tree_path(const char *rel)
{
	const char *root = getenv("STATIC_PROBE_ROOT");
	char *out;

	if (!rel || !root)
		die("tree changes need a path and STATIC_PROBE_ROOT");
	if (rel[0] == '/' || !root[0])
		out = strdup(rel);
	else if (asprintf(&out, "%s%s%s", root, root[strlen(root) - 1] == '/' ? "" : "/", rel) < 0)
		out = NULL;
	if (!out)
		die("out of memory");
	return out;
}

static int err(int rc)
{
	return rc ? errno : 0;
}

/* shutil.rmtree's fd-based walk: the entries read first, then each removed (a
 * directory, not followed, emptied first); the first error stops it. */
static int rmtree_fd(int topfd)
{
	int fd = dup(topfd), rc = 0, n = 0, cap = 16;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	char **names = malloc(sizeof(char *) * cap);
	unsigned char *types = malloc(cap);

	if (!d) {
		rc = errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	rewinddir(d);
	while ((errno = 0, e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap *= 2;
			names = realloc(names, sizeof(char *) * cap);
			types = realloc(types, cap);
		}
		types[n] = e->d_type;
		names[n++] = strdup(e->d_name);
	}
	rc = errno;
	closedir(d);
	for (int i = 0; i < n && !rc; i++) {
		struct stat st, st2;
		int is_dir = types[i] == DT_DIR, sub;

		if (types[i] == DT_UNKNOWN)
			is_dir = !fstatat(topfd, names[i], &st, AT_SYMLINK_NOFOLLOW) &&
				 S_ISDIR(st.st_mode);
		if (is_dir) {
			if (fstatat(topfd, names[i], &st, AT_SYMLINK_NOFOLLOW)) {
				rc = errno;
				break;
			}
			is_dir = S_ISDIR(st.st_mode);
		}
		if (!is_dir) {
			rc = err(unlinkat(topfd, names[i], 0));
			continue;
		}
		sub = openat(topfd, names[i], O_RDONLY | O_CLOEXEC);
		if (sub < 0) {
			rc = errno;
			break;
		}
		if (fstat(sub, &st2) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
			close(sub);
			return -1; /* "Cannot call rmtree on a symbolic link": no errno */
		}
		rc = rmtree_fd(sub);
		close(sub);
		if (!rc)
			rc = err(unlinkat(topfd, names[i], AT_REMOVEDIR));
	}
out:
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(types);
	return rc;
}

static int rmtree(const char *path)
{
	struct stat st, st2;
	int fd, rc;

	if (lstat(path, &st))
		return errno;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st2) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
		close(fd);
		return -1;
	}
	rc = rmtree_fd(fd);
	close(fd);
	return rc ? rc : err(rmdir(path));
}

/* probe.py's "remove": os.path.isdir and not os.path.islink: rmtree; else unlink */
static int remove_path(const char *path)
{
	struct stat st, lst;

	if (!stat(path, &st) && S_ISDIR(st.st_mode) && !(!lstat(path, &lst) && S_ISLNK(lst.st_mode)))
		return rmtree(path);
	return err(unlink(path));
}

/* os.path.split */
static void split(const char *p, char **head, char **tail)
{
	const char *slash = strrchr(p, '/');
	size_t i = slash ? (size_t)(slash - p) + 1 : 0, j = i, k;

	*tail = strdup(p + i);
	for (k = 0; k < i && p[k] == '/'; k++)
		;
	if (k < i) /* head is not all slashes: strip them */
		while (j > 0 && p[j - 1] == '/')
			j--;
	*head = strndup(p, j);
}

/* os.makedirs(name, exist_ok=True) */
static int makedirs(const char *name)
{
	char *head, *tail;
	struct stat st;
	int rc = 0;

	split(name, &head, &tail);
	if (!*tail) {
		char *h = head;

		free(tail);
		split(h, &head, &tail);
		free(h);
	}
	if (*head && *tail && stat(head, &st)) {
		rc = makedirs(head);
		if (rc && rc != EEXIST)
			goto out;
		rc = 0;
		if (!strcmp(tail, "."))
			goto out;
	}
	if (mkdir(name, 0777)) {
		rc = errno;
		if (!stat(name, &st) && S_ISDIR(st.st_mode))
			rc = 0;
	}
out:
	free(head);
	free(tail);
	return rc;
}

static int write_hex(const char *path, const char *hex)
{
	size_t n = strlen(hex) / 2, done = 0;
	unsigned char *data = malloc(n + 1);
	int fd, rc = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned int byte;

		if (sscanf(hex + 2 * i, "%2x", &byte) != 1)
			die("write: data is not hex");
		data[i] = (unsigned char)byte;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = errno;
	} else {
		while (done < n && !rc) {
			ssize_t w = write(fd, data + done, n - done);

			if (w < 0 && errno != EINTR)
				rc = errno;
			else if (w > 0)
				done += (size_t)w;
		}
		if (close(fd) && !rc)
			rc = errno;
	}
	free(data);
	return rc;
}

static struct timespec now_plus(const char *seconds)
{
	struct timespec ts;
	double t;

	clock_gettime(CLOCK_REALTIME, &ts);
	t = (double)ts.tv_sec + ts.tv_nsec / 1e9 + strtod(seconds, NULL);
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	return ts;
}

static time_t stamp;

static int normalize_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	struct timespec ts[2] = {{stamp, 0}, {stamp, 0}};

	(void)ftw;
	if (flag != FTW_NS && sb->st_mtim.tv_sec >= RECENT)
		utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/* How many arguments a tree change takes (-1: not one). */
static int tree_args(const char *op)
{
	static const char *const ops[] = {"write", "2", "remove", "1", "touch", "2", "symlink", "2",
					  "mkdir", "1", "rename", "2", "utime", "2", "chmod", "2",
					  "mknod", "3", NULL};

	for (int i = 0; ops[i]; i += 2)
		if (!strcmp(op, ops[i]))
			return ops[i + 1][0] - '0';
	return -1;
}

/* One change of step k; 0 or errno (-1: a failure without errno). */
static int tree_change(const char *op, char **a, int k)
{
	char *path = tree_path(a[0]), *other = NULL;
	struct stat st;
	int rc, settles = 1; /* whether the kernel's "now" mtimes are normalised after */

	if (!strcmp(op, "write")) {
		rc = write_hex(path, a[1]);
	} else if (!strcmp(op, "remove")) {
		rc = remove_path(path);
	} else if (!strcmp(op, "touch")) {
		struct timespec ts = {STEP_EPOCH + k + atol(a[1]), 0};
		struct timespec tt[2];

		if (!fuzz)
			ts = now_plus(a[1]);
		tt[0] = tt[1] = ts;
		rc = err(utimensat(AT_FDCWD, path, tt, 0));
		settles = 0;
	} else if (!strcmp(op, "symlink")) {
		rc = err(symlink(a[1], path));
	} else if (!strcmp(op, "mkdir")) {
		rc = makedirs(path);
	} else if (!strcmp(op, "rename")) {
		other = tree_path(a[1]);
		rc = err(rename(path, other));
	} else if (!strcmp(op, "utime")) {
		other = tree_path(a[1]);
		rc = err(stat(other, &st));
		if (!rc) {
			struct timespec tt[2] = {st.st_atim, st.st_mtim};

			rc = err(utimensat(AT_FDCWD, path, tt, 0));
		}
		settles = 0;
	} else if (!strcmp(op, "chmod")) {
		rc = err(chmod(path, (mode_t)strtol(a[1], NULL, 8)));
		settles = 0;
	} else {
		rc = err(mknod(path, 0666 | S_IFCHR, makedev(atoi(a[1]), atoi(a[2]))));
	}
	if (!rc && settles && fuzz) {
		stamp = STEP_EPOCH + k;
		nftw(getenv("STATIC_PROBE_ROOT"), normalize_one, 32, FTW_PHYS);
	}
	free(path);
	free(other);
	return rc;
}

#endif
