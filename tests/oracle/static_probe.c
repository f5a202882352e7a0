/*
 * The real STATIC libibverbs/librdmacm, driven by a list of operations.
 *
 *     static_probe [--fuzz] OP...
 *
 * Built by tests/oracle/static.py with `gcc -static` against libibverbs.a and
 * librdmacm.a, with or without -DRDMA_STATIC_PROVIDERS=..., and run on a fixture
 * tree through tests/oracle/harness.py.  Each operation prints one JSON object on
 * stdout, in the shapes of tests/oracle/probe.py (list, free, open, fork_init,
 * fork_status, the tree changes) and tests/oracle/rdmacm_probe.py (rdma_get,
 * rdma_free, ibv_list), so a test compares the parsed results with those probes'
 * results for sysverbs:
 *
 *   list          ibv_get_device_list and each device's fields; the list is kept
 *   free K        ibv_free_device_list of the K-th list that `list` returned
 *   open K I      ibv_open_device of the K-th list's I-th device, then close: 0 or errno
 *   fork_init     ibv_fork_init; fork_status: ibv_is_fork_initialized
 *   rdma_get      rdma_get_devices: the contexts in order, or errno; kept
 *   rdma_free K   rdma_free_devices of the K-th list that `rdma_get` returned
 *   ibv_list      ibv_get_device_list, the names only, then freed
 *   devices       what rdma-core's ibv_devices prints (text, not JSON): the two
 *                 header lines and one line per device; on a NULL list the
 *                 perror line on stderr and exit status 1
 *
 * and probe.py's tree changes, paths relative to $STATIC_PROBE_ROOT (the tree's root,
 * joined as os.path.join does), each the Python call it stands for:
 *
 *   write P HEX   open(P, "wb").write(bytes.fromhex(HEX))
 *   remove P      shutil.rmtree(P) for a directory that is no link, else unlink(2)
 *   touch P S     utime to now + S seconds (--fuzz: STEP_EPOCH + k + S, no fraction)
 *   symlink P T   symlink(2) T at P
 *   mkdir P       os.makedirs(P, exist_ok=True)
 *   rename P Q    rename(2)
 *   utime P Q     give P the atime and mtime of Q (stat(2), to the nanosecond)
 *   chmod P MODE  chmod(2), MODE in octal
 *   mknod P MAJ MIN  a char device, mode 0666
 *
 * Device and context identity is reported as labels: d0, d1... for the same
 * struct ibv_device * (one numbering for list, another for rdma_get, as the two
 * Python probes number them), c0, c1... for the same struct ibv_context *.
 *
 * --fuzz gives tests/fuzz/probe.py's rules instead of tests/oracle/probe.py's, so the
 * differential fuzzer compares this program's stdout with that probe's byte for byte:
 * its canonical labels (struct fuzz_labels), `free`/`open` that would be undefined
 * behaviour (a list that failed, was freed or is empty) print {"skipped": true} and do
 * nothing, `open` takes the device index modulo the list's length and reports a
 * failure that left errno alone as null, a tree change that fails reports
 * {"failed": errno} (without --fuzz the program stops, as probe.py raises), and after
 * step k changes the tree every mtime the kernel set to "now" (at or after RECENT)
 * becomes STEP_EPOCH + k (tests/fuzz/model.py's normalize_mtimes).
 *
 * Compiled with -DPROBE_NO_IBV_CALL the program never names ibv_get_device_list
 * (list, ibv_list and devices are then refused with exit status 2): only
 * rdma_get_devices reaches libibverbs' device list.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAX_LISTS 256
#define MAX_LABELS 4096
/* tests/fuzz/model.py's STEP_EPOCH and RECENT */
#define STEP_EPOCH 1400000000L
#define RECENT 1600000000L
/* tests/fuzz/probe.py's UNSET: errno before ibv_open_device() */
#define UNSET 9999

struct labels {
	const void *seen[MAX_LABELS];
	int count;
};

static struct labels list_devices, cm_devices, cm_contexts;
static struct ibv_device **lists[MAX_LISTS];
static int list_sizes[MAX_LISTS];
static int list_freed[MAX_LISTS];
static int nlists;
static struct ibv_context **cm_lists[MAX_LISTS];
static int ncm_lists;
static int fuzz;

static void die(const char *what)
{
	fprintf(stderr, "static_probe: %s\n", what);
	exit(2);
}

static int label_of(struct labels *l, const void *p)
{
	for (int i = 0; i < l->count; i++)
		if (l->seen[i] == p)
			return i;
	if (l->count == MAX_LABELS)
		die("too many labels");
	l->seen[l->count] = p;
	return l->count++;
}

/* tests/fuzz/probe.py's Labels, rule for rule: a device that an unfreed list holds is
 * matched by address; one that no list holds (malloc may give its address to a new
 * device) keeps its label only when a device of the last list with the very same
 * fields is listed again; labels out of the last list and held by no list retire. */
struct fuzz_labels {
	const void *ident[MAX_LABELS]; /* by_ident: ident[i] -> label[i] */
	int label[MAX_LABELS];
	int nidents;
	const void *ident_of[MAX_LABELS]; /* per label */
	int holders[MAX_LABELS];          /* how many unfreed lists hold it */
	char *fields[MAX_LABELS];
	char latest[MAX_LABELS];
	int count;
	int *held[MAX_LISTS]; /* each list's labels */
	int nheld[MAX_LISTS];
};

static struct fuzz_labels fl;

static int by_ident(const void *ident)
{
	for (int i = 0; i < fl.nidents; i++)
		if (fl.ident[i] == ident)
			return i;
	return -1;
}

static void drop_ident(int i)
{
	fl.nidents--;
	fl.ident[i] = fl.ident[fl.nidents];
	fl.label[i] = fl.label[fl.nidents];
}

static void retire(void)
{
	for (int i = fl.nidents - 1; i >= 0; i--)
		if (!fl.latest[fl.label[i]] && !fl.holders[fl.label[i]])
			drop_ident(i);
}

/* The labels of list k's n devices (idents, fields: the JSON of all other fields). */
static void fuzz_listed(int k, int n, const void **idents, char **fields, int *out)
{
	int unheld[MAX_LABELS], nunheld = 0;

	for (int lb = 0; lb < fl.count; lb++)
		if (fl.latest[lb] && !fl.holders[lb])
			unheld[nunheld++] = lb;
	for (int j = 0; j < n; j++) {
		int i = by_ident(idents[j]), label = i < 0 ? -1 : fl.label[i], dup = 0;

		if (label < 0 || !fl.holders[label]) {
			label = -1;
			for (int u = 0; u < nunheld; u++) {
				if (unheld[u] >= 0 && !strcmp(fl.fields[unheld[u]], fields[j])) {
					label = unheld[u];
					unheld[u] = -1; /* popped */
					break;
				}
			}
		}
		for (int m = 0; m < j && label >= 0; m++)
			dup |= out[m] == label;
		if (label < 0 || dup) {
			if (fl.count == MAX_LABELS)
				die("too many labels");
			label = fl.count++;
			fl.ident_of[label] = NULL;
		}
		if (fl.ident_of[label] && fl.ident_of[label] != idents[j]) {
			int old = by_ident(fl.ident_of[label]);

			if (old >= 0 && fl.label[old] == label)
				drop_ident(old);
		}
		i = by_ident(idents[j]);
		if (i < 0) {
			if (fl.nidents == MAX_LABELS)
				die("too many labels");
			i = fl.nidents++;
			fl.ident[i] = idents[j];
		}
		fl.label[i] = label;
		fl.ident_of[label] = idents[j];
		fl.holders[label]++;
		free(fl.fields[label]);
		fl.fields[label] = strdup(fields[j]);
		out[j] = label;
	}
	memset(fl.latest, 0, sizeof(fl.latest));
	for (int j = 0; j < n; j++)
		fl.latest[out[j]] = 1;
	fl.held[k] = malloc(sizeof(int) * (n ? n : 1));
	memcpy(fl.held[k], out, sizeof(int) * n);
	fl.nheld[k] = n;
	retire();
}

static void fuzz_freed(int k)
{
	for (int j = 0; j < fl.nheld[k]; j++)
		fl.holders[fl.held[k][j]]--;
	retire();
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 if there is none
 * (the rules of Python's strict decoder: no overlong forms, no surrogates, nothing
 * above U+10FFFF); *cp receives the code point. */
static int utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c = s[0];
	int len;
	uint32_t min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		min = 0x80;
		c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		min = 0x800;
		c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		min = 0x10000;
		c &= 0x07;
	} else {
		return 0;
	}
	if ((size_t)len > n)
		return 0;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* A C string as a JSON string, as Python's json.dumps writes os.fsdecode(s), on f:
 * bytes that are not UTF-8 become U+DC80+byte (surrogateescape). */
static void put_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);

	putc('"', f);
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int len = utf8_seq(s + i, n - i, &cp);

		if (len == 0) {
			fprintf(f, "\\u%04x", 0xdc00 | s[i]);
			i++;
			continue;
		}
		i += len;
		if (cp == '"' || cp == '\\')
			fprintf(f, "\\%c", (int)cp);
		else if (cp == '\n')
			fputs("\\n", f);
		else if (cp == '\r')
			fputs("\\r", f);
		else if (cp == '\t')
			fputs("\\t", f);
		else if (cp == '\b')
			fputs("\\b", f);
		else if (cp == '\f')
			fputs("\\f", f);
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0x10000))
			fprintf(f, "\\u%04x", cp);
		else if (cp >= 0x10000)
			fprintf(f, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
			       0xdc00 + ((cp - 0x10000) & 0x3ff));
		else
			putc((int)cp, f);
	}
	putc('"', f);
}

/* ibv_get_device_guid gives the GUID in network order; the probes print it as
 * one big-endian number. */
static unsigned long long guid_of(struct ibv_device *dev)
{
	return (unsigned long long)be64toh(ibv_get_device_guid(dev));
}

#include "static_tree.h"

static int list_index(const char *arg, int count)
{
	char *end;
	long k;

	if (!arg)
		die("free needs a list number");
	k = strtol(arg, &end, 10);
	if (*end || k < 0 || k >= count)
		die("no such list");
	return (int)k;
}

/* A number argument; with --fuzz a list number may name no list (then -1). */
static int number(const char *arg)
{
	char *end;
	long k;

	if (!arg)
		die("missing number");
	k = strtol(arg, &end, 10);
	if (*end || k < 0)
		die("not a number");
	return (int)k;
}

#ifndef PROBE_NO_IBV_CALL
/* ibv_get_device_list; on NULL, errno printed with on_error's format. */
static struct ibv_device **get_list(int *num, const char *on_error)
{
	struct ibv_device **devs;

	*num = -1;
	errno = 0;
	devs = ibv_get_device_list(num);
	if (!devs)
		printf(on_error, errno);
	return devs;
}

/* The device's fields before the "id" key (a) and after it (b), as JSON. */
static void device_fields(struct ibv_device *d, char **a, char **b)
{
	size_t n;
	FILE *f = open_memstream(a, &n);

	fputs("\"dev_name\": ", f);
	put_json_string(f, d->dev_name);
	fputs(", \"dev_path\": ", f);
	put_json_string(f, d->dev_path);
	fprintf(f, ", \"guid\": \"%016llx\", \"ibdev_path\": ", guid_of(d));
	put_json_string(f, d->ibdev_path);
	fclose(f);
	f = open_memstream(b, &n);
	fprintf(f, "\"index\": %d, \"name\": ", ibv_get_device_index(d));
	put_json_string(f, ibv_get_device_name(d));
	fprintf(f, ", \"node_type\": %d, \"transport_type\": %d", (int)d->node_type,
		(int)d->transport_type);
	fclose(f);
}

static void op_list(void)
{
	int num;
	struct ibv_device **devs = get_list(&num, "{\"errno\": %d, \"op\": \"list\"}\n");
	const void **idents;
	char **a, **b, **keys;
	int *ids;

	if (!devs)
		return;
	if (nlists == MAX_LISTS)
		die("too many lists");
	if (devs[num])
		die("device list not NULL-terminated at num");
	idents = calloc(num + 1, sizeof(*idents));
	a = calloc(num + 1, sizeof(*a));
	b = calloc(num + 1, sizeof(*b));
	keys = calloc(num + 1, sizeof(*keys));
	ids = calloc(num + 1, sizeof(*ids));
	for (int i = 0; i < num; i++) {
		idents[i] = devs[i];
		device_fields(devs[i], &a[i], &b[i]);
		if (asprintf(&keys[i], "%s, %s", a[i], b[i]) < 0)
			die("out of memory");
		if (!fuzz)
			ids[i] = label_of(&list_devices, devs[i]);
	}
	if (fuzz)
		fuzz_listed(nlists, num, idents, keys, ids);
	list_sizes[nlists] = num;
	lists[nlists++] = devs;
	fputs("{\"devices\": [", stdout);
	for (int i = 0; i < num; i++) {
		printf("%s{%s, \"id\": \"d%d\", %s}", i ? ", " : "", a[i], ids[i], b[i]);
		free(a[i]);
		free(b[i]);
		free(keys[i]);
	}
	fputs("], \"op\": \"list\"}\n", stdout);
	free(idents);
	free(a);
	free(b);
	free(keys);
	free(ids);
}

static void op_ibv_list(void)
{
	int num;
	struct ibv_device **devs = get_list(&num, "{\"op\": \"ibv_list\", \"result\": %d}\n");

	if (!devs)
		return;
	fputs("{\"op\": \"ibv_list\", \"result\": [", stdout);
	for (int i = 0; i < num; i++) {
		if (i)
			fputs(", ", stdout);
		put_json_string(stdout, devs[i]->name);
	}
	fputs("]}\n", stdout);
	ibv_free_device_list(devs);
}

/* The output of ibv_devices, format for format. */
static void op_devices(void)
{
	int num;
	struct ibv_device **devs = ibv_get_device_list(&num);

	if (!devs) {
		perror("Failed to get IB devices list");
		exit(1);
	}
	printf("    %-16s\t   node GUID\n", "device");
	printf("    %-16s\t----------------\n", "------");
	for (int i = 0; i < num; i++)
		printf("    %-16s\t%016llx\n", ibv_get_device_name(devs[i]), guid_of(devs[i]));
	ibv_free_device_list(devs);
}
#else
static void op_list(void)
{
	die("built with PROBE_NO_IBV_CALL: no list");
}

static void op_ibv_list(void)
{
	die("built with PROBE_NO_IBV_CALL: no ibv_list");
}

static void op_devices(void)
{
	die("built with PROBE_NO_IBV_CALL: no devices");
}
#endif

static void op_free(const char *arg)
{
	int k = fuzz ? number(arg) : list_index(arg, nlists);

	if (fuzz && (k >= nlists || list_freed[k])) {
		puts("{\"op\": \"free\", \"skipped\": true}");
		return;
	}
	ibv_free_device_list(lists[k]);
	list_freed[k] = 1;
	if (fuzz)
		fuzz_freed(k);
	puts("{\"op\": \"free\"}");
}

/* ibv_open_device + ibv_close_device: 0 or errno; with --fuzz, null where errno
 * was left alone (probe.py's open_close). */
static void op_open(const char *karg, const char *iarg)
{
	int k = fuzz ? number(karg) : list_index(karg, nlists), i = number(iarg);
	struct ibv_context *ctx;

	if (fuzz && (k >= nlists || list_freed[k] || !list_sizes[k])) {
		puts("{\"op\": \"open\", \"skipped\": true}");
		return;
	}
	if (fuzz)
		i %= list_sizes[k];
	else if (i >= list_sizes[k])
		die("no such device");
	errno = fuzz ? UNSET : 0;
	ctx = ibv_open_device(lists[k][i]);
	if (ctx) {
		ibv_close_device(ctx);
		puts("{\"errno\": 0, \"op\": \"open\"}");
	} else if (fuzz && errno == UNSET) {
		puts("{\"errno\": null, \"op\": \"open\"}");
	} else {
		printf("{\"errno\": %d, \"op\": \"open\"}\n", errno);
	}
}

static void op_rdma_get(void)
{
	int num = -1;
	struct ibv_context **ctxs;

	errno = 0;
	ctxs = rdma_get_devices(&num);
	if (!ctxs) {
		if (num != 0)
			die("rdma_get_devices: NULL but *num != 0");
		printf("{\"errno\": %d, \"op\": \"rdma_get\"}\n", errno);
		return;
	}
	if (ncm_lists == MAX_LISTS)
		die("too many lists");
	cm_lists[ncm_lists++] = ctxs;
	fputs("{\"contexts\": [", stdout);
	for (int i = 0; i < num; i++) {
		struct ibv_device *d = ctxs[i]->device;

		printf("%s{\"ctx\": \"c%d\", \"dev\": \"d%d\", \"guid\": \"%016llx\", \"name\": ",
		       i ? ", " : "", label_of(&cm_contexts, ctxs[i]), label_of(&cm_devices, d),
		       guid_of(d));
		put_json_string(stdout, d->name);
		putchar('}');
	}
	if (ctxs[num])
		die("rdma_get_devices list not NULL-terminated at num");
	fputs("], \"op\": \"rdma_get\"}\n", stdout);
}

int main(int argc, char **argv)
{
	int first = argc > 1 && !strcmp(argv[1], "--fuzz");

	fuzz = first;
	for (int i = 1 + first, k = 0; i < argc; i++, k++) {
		const char *op = argv[i];
		int n = tree_args(op);

		if (n >= 0) {
			int rc;

			if (i + n >= argc)
				die("a tree change without its arguments");
			rc = tree_change(op, argv + i + 1, k);
			i += n;
			if (rc && !fuzz)
				die("a tree change failed");
			if (rc == -1)
				printf("{\"failed\": null, \"op\": \"%s\"}\n", op);
			else if (rc)
				printf("{\"failed\": %d, \"op\": \"%s\"}\n", rc, op);
			else
				printf("{\"op\": \"%s\"}\n", op);
		} else if (!strcmp(op, "list")) {
			op_list();
		} else if (!strcmp(op, "free")) {
			op_free(argv[++i]);
		} else if (!strcmp(op, "open")) {
			op_open(argv[i + 1], i + 2 < argc ? argv[i + 2] : NULL);
			i += 2;
		} else if (!strcmp(op, "fork_init")) {
			printf("{\"op\": \"fork_init\", \"result\": %d}\n", ibv_fork_init());
		} else if (!strcmp(op, "fork_status")) {
			printf("{\"op\": \"fork_status\", \"status\": %d}\n",
			       (int)ibv_is_fork_initialized());
		} else if (!strcmp(op, "rdma_get")) {
			op_rdma_get();
		} else if (!strcmp(op, "rdma_free")) {
			int m = list_index(argv[++i], ncm_lists);

			rdma_free_devices(cm_lists[m]);
			puts("{\"op\": \"rdma_free\"}");
		} else if (!strcmp(op, "ibv_list")) {
			op_ibv_list();
		} else if (!strcmp(op, "devices")) {
			op_devices();
		} else {
			die("unknown operation");
		}
		fflush(stdout);
	}
	return 0;
}
